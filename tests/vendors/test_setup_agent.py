"""The onboarding guide's `sudo ./scripts/buildkite/setup-agent.sh <gpu index> <queue> <memory> <cpus>` against a
temporary root, with systemctl a recording stand-in: the files it writes, the token it reads, the units it starts."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.fakes.host import REPO, FakeHost

SETUP = REPO / "scripts" / "buildkite" / "setup-agent.sh"
SETUP_ALL = REPO / "deploy" / "buildkite" / "setup-agents.sh"
TOKEN = "bkat_0123456789abcdef"


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    return FakeHost(tmp_path)


def setup(host: FakeHost, *args: str, script: Path = SETUP) -> subprocess.CompletedProcess:
    return subprocess.run([str(script), *args, "--root", str(host.root)], env=host.env(), capture_output=True,
                          text=True, timeout=60, check=False)


def test_one_call_per_gpu_writes_the_guide_s_unit_slice_and_agent_config(host):
    host.write_token(TOKEN)
    for index in (0, 1):
        done = setup(host, str(index), f"nvidia-h100-{index}", "32G", "16")
        assert done.returncode == 0, done.stderr

    systemd = host.root / "etc" / "systemd" / "system"
    assert sorted(p.name for p in systemd.iterdir()) == [
        "buildkite-agent-gpu0.service", "buildkite-agent-gpu1.service", "buildkite-gpu0.slice", "buildkite-gpu1.slice"]
    unit = (systemd / "buildkite-agent-gpu1.service").read_text()
    assert "Slice=buildkite-gpu1.slice" in unit
    assert "Environment=CUDA_VISIBLE_DEVICES=1" in unit
    assert "--config /etc/buildkite-agent/agent-1/buildkite-agent.cfg" in unit
    slice_text = (systemd / "buildkite-gpu1.slice").read_text()
    assert "MemoryMax=32G" in slice_text and "CPUQuota=1600%" in slice_text

    cfg = host.root / "etc" / "buildkite-agent" / "agent-1" / "buildkite-agent.cfg"
    text = cfg.read_text()
    assert f'token="{TOKEN}"' in text  # read from /etc/buildkite-agent/token
    assert 'tags="queue=nvidia-h100-1,gpu-index=1"' in text
    assert "no-command-eval=true" in text
    assert cfg.stat().st_mode & 0o777 == 0o600  # it holds the token

    calls = host.argvs("systemctl")
    assert ["daemon-reload"] in calls
    assert ["enable", "--now", "buildkite-agent-gpu0.service"] in calls
    assert ["enable", "--now", "buildkite-agent-gpu1.service"] in calls
    assert host.active("buildkite-agent-gpu0.service") and host.active("buildkite-agent-gpu1.service")


def test_the_token_never_appears_on_a_command_line(host):
    host.write_token(TOKEN)
    done = setup(host, "0", "nvidia-h100-0", "32G", "16")
    assert done.returncode == 0, done.stderr
    assert TOKEN not in done.stdout + done.stderr
    assert all(TOKEN not in " ".join(argv) for argv in host.argvs("systemctl"))


def test_without_the_token_file_it_says_where_the_token_goes_and_writes_nothing(host):
    done = setup(host, "0", "nvidia-h100-0", "32G", "16")
    assert done.returncode == 2
    assert "BUILDKITE_AGENT_TOKEN=<agent token> in /etc/buildkite-agent/token" in done.stderr
    assert not (host.root / "etc" / "systemd").exists()
    assert host.calls() == []


def test_a_token_file_without_the_variable_is_refused(host):
    path = host.write_token(TOKEN)
    path.write_text(TOKEN + "\n")  # the bare token, not the guide's line
    done = setup(host, "0", "nvidia-h100-0", "32G", "16")
    assert done.returncode == 2 and "has no BUILDKITE_AGENT_TOKEN=" in done.stderr


@pytest.mark.parametrize(("args", "message"), [
    (("0", "H100-0", "32G", "16"), "{vendor}-{gpu}-{index}"),
    (("0", "nvidia-h100", "32G", "16"), "{vendor}-{gpu}-{index}"),
    (("0", "nvidia_h100_0", "32G", "16"), "{vendor}-{gpu}-{index}"),
    (("zero", "nvidia-h100-0", "32G", "16"), "GPU index must be a number"),
    (("0", "nvidia-h100-0", "lots", "16"), "memory must be a size"),
    (("0", "nvidia-h100-0", "32G", "0"), "cpus must be a whole number"),
])
def test_bad_arguments_are_refused_with_the_rule_they_break(host, args, message):
    host.write_token(TOKEN)
    done = setup(host, *args)
    assert done.returncode == 2
    assert message in done.stderr
    assert host.calls() == []


def test_the_guide_s_missing_arguments_show_the_usage(host):
    done = subprocess.run([str(SETUP), "0"], env=host.env(), capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "usage: setup-agent.sh <gpu index> <queue" in done.stderr


def test_the_all_gpus_script_sets_up_each_gpu_through_the_same_script(host):
    host.write_token(TOKEN)
    host.amd_gpus(2)  # ROCm's tools list them; sysfs gives each its render node
    done = setup(host, "--vendor", "AMD", "--gpu", "MI300", "--count", "2", "--memory", "64G", "--cpus", "8",
                 script=SETUP_ALL)
    assert done.returncode == 0, done.stderr
    assert "amd-MI300: {backend: buildkite, queues: [amd-mi300-0, amd-mi300-1]}" in done.stdout
    unit = (host.root / "etc" / "systemd" / "system" / "buildkite-agent-gpu1.service").read_text()
    assert "Environment=HIP_VISIBLE_DEVICES=1" in unit and "Environment=ROCR_VISIBLE_DEVICES=1" in unit
    cfg = (host.root / "etc" / "buildkite-agent" / "agent-1" / "buildkite-agent.cfg").read_text()
    assert 'tags="queue=amd-mi300-1,gpu-index=1"' in cfg


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_every_unit_and_slice_passes_systemd_analyze_verify(host, tmp_path):
    host.write_token(TOKEN)
    assert setup(host, "0", "nvidia-h100-0", "32G", "16").returncode == 0
    # verify resolves ExecStart's binary; point the unit at one that exists here, nothing else changes
    systemd = host.root / "etc" / "systemd" / "system"
    for path in sorted(systemd.iterdir()):
        text = path.read_text().replace("/usr/bin/buildkite-agent", "/bin/true")
        checked = tmp_path / "verify" / path.name
        checked.parent.mkdir(exist_ok=True)
        checked.write_text(text)
    done = subprocess.run(["systemd-analyze", "verify", "--man=no",
                           *(str(p) for p in sorted((tmp_path / "verify").iterdir()))],
                          capture_output=True, text=True, timeout=60, check=False)
    # Unknown keys and bad values are only warnings (exit 0): any line on stderr is a finding.
    assert done.returncode == 0 and done.stderr.strip() == "", done.stderr
