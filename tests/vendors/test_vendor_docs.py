"""docs/vendors.md, executed: every `bash` block runs as written, in order, on a vendor host under a temporary root
(paths below /etc and /sys are moved under it; systemctl, journalctl, docker and sudo are recording stand-ins).
Operator blocks are checked against the code: catalogue YAML through the catalogue's own validation, `kernelbot`
commands against their --help, repository paths and links against the files."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from runner.task.toolchain import load
from services.cli.toolchain_render import published_image
from services.dispatcher.catalogue import build_catalogue
from tests.support.fakes.host import REPO, FakeHost

PAGE = REPO / "docs" / "vendors.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
MOVED = ("/etc/buildkite-agent", "/etc/systemd", "/sys/fs/cgroup")
KERNELBOT = Path(sys.executable).with_name("kernelbot")


def blocks(kind: str) -> list[str]:
    return [body for info, body in BLOCK.findall(PAGE.read_text()) if info == kind]


def under_root(script: str, root: Path) -> str:
    for prefix in MOVED:
        script = script.replace(prefix, f"{root}{prefix}")
    return script


@pytest.fixture(scope="module")
def walked(tmp_path_factory: pytest.TempPathFactory) -> tuple[FakeHost, Path, list[subprocess.CompletedProcess]]:
    """The page's host commands, run in order from a checkout on a two-GPU host."""
    base = tmp_path_factory.mktemp("vendor-docs")
    host = FakeHost(base / "host")
    checkout = base / "kernelbot"
    checkout.mkdir()
    for part in ("scripts", "deploy"):
        (checkout / part).symlink_to(REPO / part)
    host.publish_image(published_image(load("nvidia")), "sha256:release1")  # this checkout's manifest
    host.visible_gpus(1)
    for index in (0, 1):  # what the kernel shows once systemd started the slices the page's setup writes
        host.cgroup(index, str(32 * 1024**3), "1600000 100000")
    env = host.env(KERNELBOT_ROOT=str(host.root), TERM="dumb")
    env["PATH"] = f"{host.bin}:{KERNELBOT.parent}:{os.environ['PATH']}"
    done = []
    for script in blocks("bash"):
        done.append(subprocess.run(["bash", "-euo", "pipefail", "-c", under_root(script, host.root)], cwd=checkout,
                                   env=env, capture_output=True, text=True, timeout=300, check=False))
    return host, checkout, done


def test_the_page_shows_every_step_of_the_onboarding():
    text = "\n".join(blocks("bash"))
    for command in ("setup-agent.sh 0 nvidia-h100-0 32G 16", "systemctl start 'buildkite-agent-gpu*'",
                    "systemctl status buildkite-agent-gpu0", "journalctl -u buildkite-agent-gpu0",
                    "buildkite-gpu0.slice/memory.max", "buildkite-gpu0.slice/cpu.max", "update-image.sh --auto",
                    "SUBMISSION_PAYLOAD", "host-check", "runner.env"):
        assert command in text, command


@pytest.mark.slow
def test_every_host_command_of_the_page_succeeds(walked):
    _, _, done = walked
    for result in done:
        assert result.returncode == 0, f"{result.args[-1]}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"


@pytest.mark.slow
def test_the_setup_reads_the_token_file_and_writes_the_guide_s_files(walked):
    host, _, _ = walked
    cfg = (host.root / "etc" / "buildkite-agent" / "agent-1" / "buildkite-agent.cfg").read_text()
    assert 'token="<agenttoken>"' in cfg and 'tags="queue=nvidia-h100-1,gpu-index=1"' in cfg
    assert (host.root / "etc" / "systemd" / "system" / "buildkite-gpu0.slice").exists()
    assert host.active("buildkite-agent-gpu0.service") and host.active("buildkite-agent-gpu1.service")
    starts = [argv for argv in host.argvs("systemctl") if argv[:1] == ["start"]]
    assert starts == [["start", "buildkite-agent-gpu*"]]
    assert ["-u", "buildkite-agent-gpu0", "--no-pager", "-n", "50"] in host.argvs("journalctl")


@pytest.mark.slow
def test_the_limits_the_page_prints_are_the_slice_s(walked):
    _, _, done = walked
    limits = next(result for result in done if "memory.max" in result.args[-1])
    assert limits.stdout.split("\n")[:2] == ["34359738368", "1600000 100000"]


@pytest.mark.slow
def test_the_image_is_pulled_and_auto_restarts_nothing_already_current(walked):
    host, _, done = walked
    assert host.image_id("kernelbot-runner:latest") == "sha256:release1"
    auto = next(result for result in done if "--auto" in result.args[-1])
    assert "runner image unchanged" in auto.stdout and "agents restarted: 0" in auto.stdout


@pytest.mark.slow
def test_the_smoke_test_leaves_a_result_that_says_it_ran(walked):
    _, checkout, done = walked
    result = json.loads((checkout / "smoke" / "result.json").read_text())
    assert result["success"] is True
    assert result["runs"]["test"]["run"]["stdout"] == "Hello GPU!\n"
    assert any("smoke test passed" in r.stdout for r in done)


@pytest.mark.slow
def test_the_isolation_check_passes_with_and_without_a_runner_identity(walked):
    _, _, done = walked
    checks = [result for result in done if "host-check" in result.args[-1]]
    assert len(checks) == 2
    for result in checks:
        verdicts = [line.split()[0] for line in result.stdout.splitlines() if line.startswith(("OK", "FAIL"))]
        assert verdicts and set(verdicts) == {"OK"}, result.stdout
    assert "runner acme: results reported as runner.acme.run.completed" in checks[1].stdout


def test_every_catalogue_the_page_shows_is_valid():
    shown = blocks("yaml")
    assert len(shown) == 4
    for text in shown:
        catalogue = build_catalogue(json.dumps(yaml.safe_load(text)), {}, [])
        assert catalogue.gpus


def test_operator_commands_use_options_that_exist():
    commands = [shlex.split(line[2:]) for body in blocks("console") for line in body.splitlines()
                if line.startswith("$ kernelbot ")]
    assert commands
    for argv in commands:
        help_text = subprocess.run([str(KERNELBOT), argv[1], "--help"], capture_output=True, text=True,
                                   env={**os.environ, "TERM": "dumb", "COLUMNS": "200"}, check=False).stdout
        for option in (arg.split("=")[0] for arg in argv[2:] if arg.startswith("--")):
            assert option in help_text, (argv, option)


def test_repository_paths_and_links_of_the_page_exist():
    text = PAGE.read_text()
    paths = set(re.findall(r"\b((?:deploy|scripts|runner|services|tests)/[\w./-]+\.\w+)", text))
    assert paths
    for path in paths:
        assert (REPO / path).exists(), path
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if not target.startswith(("http://", "https://")):
            assert not target.startswith(("/", "..")) and (PAGE.parent / target).is_file(), target
