"""`kernelbot host-check` on a vendor host under a temporary root: one line per check, failures named, exit 1."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runner.confinement.sandbox import sandbox_level
from services.cli.host_check import cpu_max, memory_bytes, slice_cgroup
from tests.support.fakes.host import REPO, FakeHost
from tests.support.hosts import CANNOT_ISOLATE, can_simulate_a_host_without_isolation

SETUP = REPO / "scripts" / "buildkite" / "setup-agent.sh"
KERNELBOT = Path(sys.executable).with_name("kernelbot")


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    """Two GPUs set up as the guide says, started, their slices' limits in force, the image pulled."""
    host = FakeHost(tmp_path)
    host.write_token("bkat_x")
    for index in (0, 1):
        done = subprocess.run([str(SETUP), str(index), f"nvidia-h100-{index}", "32G", "16", "--root", str(host.root)],
                              env=host.env(), capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        host.cgroup(index, str(32 * 1024**3), "1600000 100000")
    host.local_image("kernelbot-runner:latest", "sha256:runner")
    host.visible_gpus(1)
    return host


def check(host: FakeHost) -> subprocess.CompletedProcess:
    return subprocess.run([str(KERNELBOT), "host-check", "--root", str(host.root)], env=host.env(),
                          capture_output=True, text=True, timeout=120, check=False)


def lines(done: subprocess.CompletedProcess) -> dict[tuple[str, str], str]:
    found = {}
    for line in done.stdout.splitlines():
        if line.startswith(("OK", "FAIL")):
            verdict, subject, name = line.split()[:3]
            found[subject, name] = verdict
    return found


def test_an_isolated_host_passes_every_check_one_line_each(host):
    done = check(host)
    assert done.returncode == 0, done.stdout + done.stderr
    expected = {("host", "image"), ("host", "identity"), ("host", "cgroups")} | {(f"gpu{i}", name) for i in (0, 1)
                                      for name in ("queue", "unit", "running", "memory.max", "cpu.max", "gpu")}
    assert set(lines(done)) == expected
    assert set(lines(done).values()) == {"OK"}
    assert "15 of 15 checks passed" in done.stdout
    gpu_runs = [argv for argv in host.argvs("docker") if argv[0] == "run"]
    assert [argv[argv.index("--gpus") + 1] for argv in gpu_runs] == ["device=0", "device=1"]


def test_limits_not_in_force_and_a_container_seeing_every_gpu_fail_by_name(host):
    host.cgroup(1, "max", "max 100000")  # the slice is not applied: no limit
    host.visible_gpus(8)  # the GPU is not isolated
    done = check(host)
    assert done.returncode == 1
    verdicts = lines(done)
    assert verdicts["gpu1", "memory.max"] == verdicts["gpu1", "cpu.max"] == "FAIL"
    assert verdicts["gpu0", "memory.max"] == "OK"
    assert verdicts["gpu0", "gpu"] == verdicts["gpu1", "gpu"] == "FAIL"
    assert "expected 34359738368 from MemoryMax=32G" in done.stdout
    assert "sees 8 GPU(s)" in done.stdout


def test_a_docker_whose_cgroup_driver_cannot_place_jobs_in_slices_fails(host):
    (host.state / "cgroup-driver").write_text("cgroupfs")
    done = check(host)
    assert done.returncode == 1
    assert lines(done)["host", "cgroups"] == "FAIL" and "jobs would escape" in done.stdout


def test_a_stopped_agent_a_missing_image_and_a_wrong_queue_tag_fail(host):
    subprocess.run(["systemctl", "stop", "buildkite-agent-gpu0.service"], env=host.env(), check=True)
    host.local_image("kernelbot-runner:latest", None)
    cfg = host.root / "etc" / "buildkite-agent" / "agent-1" / "buildkite-agent.cfg"
    cfg.write_text(cfg.read_text().replace("queue=nvidia-h100-1", "queue=H100"))
    done = check(host)
    assert done.returncode == 1
    verdicts = lines(done)
    assert verdicts["gpu0", "running"] == "FAIL" and verdicts["gpu1", "running"] == "OK"
    assert verdicts["host", "image"] == "FAIL" and "update-image.sh" in done.stdout
    assert verdicts["gpu1", "queue"] == "FAIL" and verdicts["gpu0", "queue"] == "OK"


def test_a_host_without_agents_says_how_to_set_them_up(tmp_path):
    host = FakeHost(tmp_path)
    done = check(host)
    assert done.returncode == 1
    assert lines(done)["host", "agents"] == "FAIL" and "setup-agent.sh" in done.stdout


def test_limits_are_compared_as_the_kernel_shows_them():
    assert memory_bytes("32G") == 34359738368 and memory_bytes("512M") == 536870912
    assert cpu_max("1600%") == "1600000 100000"
    assert slice_cgroup(Path("/"), "buildkite-gpu3.slice") == Path(
        "/sys/fs/cgroup/buildkite.slice/buildkite-gpu3.slice")


def test_a_runner_identity_file_must_be_private_and_well_named(host):
    env_file = host.root / "etc" / "buildkite-agent" / "runner.env"
    env_file.write_text("KB_NATS_URL=nats://runner-nebius:secret@nats.example:4222\nKB_RUNNER_NAME=nebius\n")
    env_file.chmod(0o600)
    done = check(host)
    assert done.returncode == 0, done.stdout
    assert "runner.nebius.run.completed" in done.stdout
    env_file.chmod(0o644)
    done = check(host)
    assert done.returncode == 1 and lines(done)["host", "identity"] == "FAIL"
    assert "expected 600" in done.stdout and "secret" not in done.stdout




def test_the_isolation_this_host_gives_is_reported_on_one_line_and_in_the_json(host):

    level, reason = sandbox_level()  # this process is the user host-check runs as
    done = check(host)
    [line] = [line for line in done.stdout.splitlines() if line.startswith("INFO host   isolation ")]
    assert line.split()[:4] == ["INFO", "host", "isolation", f"{level}:"] and reason in line

    as_json = subprocess.run([str(KERNELBOT), "host-check", "--root", str(host.root), "--json"], env=host.env(),
                             capture_output=True, text=True, timeout=120, check=False)
    report = json.loads(as_json.stdout)
    assert report["isolation"] == {"level": level, "reason": reason}
    assert as_json.returncode == done.returncode == (0 if report["passed"] else 1)
    assert {(c["subject"], c["name"]): c["ok"] for c in report["checks"]} == {
        key: verdict == "OK" for key, verdict in lines(done).items()}


@pytest.mark.skipif(not can_simulate_a_host_without_isolation(), reason="needs `unshare --user` and seccomp")
def test_a_host_that_cannot_build_the_sandbox_reports_limits_only_and_why(host):
    done = subprocess.run([*CANNOT_ISOLATE, str(KERNELBOT), "host-check", "--root", str(host.root), "--json"],
                          env=host.env(), capture_output=True, text=True, timeout=120, check=False)
    isolation = json.loads(done.stdout)["isolation"]
    assert isolation["level"] == "limits-only" and "namespace" in isolation["reason"]
    lines_out = subprocess.run([*CANNOT_ISOLATE, str(KERNELBOT), "host-check", "--root", str(host.root)],
                               env=host.env(), capture_output=True, text=True, timeout=120, check=False).stdout
    assert f"INFO host   isolation  limits-only: {isolation['reason']}" in lines_out
    assert "not ranked outside development mode" in lines_out
