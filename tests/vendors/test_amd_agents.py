"""AMD Buildkite agents, as NVIDIA ones: set up per GPU, checked by `kernelbot host-check`, and their jobs run in the
node's runner image with /dev/kfd and their own GPU's render node only. ROCm's tools are stand-ins
(tests/support/fakes/rocm_smi.py) answering the JSON modes of amd-smi and rocm-smi; each GPU's render node lives
under the fake root's sysfs, at a minor that is not 128 + index."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runner.task.payload import encode_payload
from tests.support.fakes.host import REPO, FakeHost
from tests.vendors.test_host_check import lines
from tests.vendors.test_pipeline import tiny_payload

SETUP = REPO / "scripts" / "buildkite" / "setup-agent.sh"
KERNELBOT = Path(sys.executable).with_name("kernelbot")
ROCM_IMAGE = "kernelbot-runner:latest"  # update-image.sh tags the AMD image so on an AMD node


def setup(host: FakeHost, index: int) -> subprocess.CompletedProcess:
    return subprocess.run([str(SETUP), str(index), f"amd-mi300-{index}", "64G", "8", "--root", str(host.root)],
                          env=host.env(), capture_output=True, text=True, check=False)


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    """Two MI300X set up as the guide says, started, limits in force, the node's (ROCm) runner image pulled."""
    host = FakeHost(tmp_path)
    host.write_token("bkat_x")
    host.amd_gpus(2)
    for index in (0, 1):
        done = setup(host, index)
        assert done.returncode == 0, done.stderr
        host.cgroup(index, str(64 * 1024**3), "800000 100000")
    host.local_image(ROCM_IMAGE, "sha256:rocm")
    return host


def unit(host: FakeHost, index: int) -> str:
    return (host.root / "etc" / "systemd" / "system" / f"buildkite-agent-gpu{index}.service").read_text()


def check(host: FakeHost) -> subprocess.CompletedProcess:
    return subprocess.run([str(KERNELBOT), "host-check", "--root", str(host.root)], env=host.env(),
                          capture_output=True, text=True, timeout=120, check=False)


def test_an_amd_agent_s_unit_names_its_gpu_to_rocm_and_fixes_its_render_node(host):
    text = unit(host, 1)
    assert "Environment=HIP_VISIBLE_DEVICES=1" in text and "Environment=ROCR_VISIBLE_DEVICES=1" in text
    assert "Environment=KERNELBOT_RENDER_NODE=/dev/dri/renderD131" in text  # GPU 1's, from its PCI address
    assert "CUDA_VISIBLE_DEVICES" not in text


def test_an_index_rocm_does_not_list_is_refused_at_setup(host):
    done = setup(host, 5)
    assert done.returncode == 2
    assert "list 2 AMD GPU(s): index 5 is not one of them" in done.stderr


def test_with_only_rocm_smi_the_render_node_is_found_the_same_way(tmp_path):
    host = FakeHost(tmp_path)
    host.write_token("bkat_x")
    host.amd_gpus(2, tools=("rocm-smi",))
    assert setup(host, 1).returncode == 0
    assert "KERNELBOT_RENDER_NODE=/dev/dri/renderD131" in unit(host, 1)


def test_host_check_passes_an_isolated_amd_host_one_line_each(host):
    done = check(host)
    assert done.returncode == 0, done.stdout + done.stderr
    verdicts = lines(done)
    assert set(verdicts.values()) == {"OK"}
    assert {("gpu0", "gpu"), ("gpu1", "gpu"), ("host", "image")} <= set(verdicts)
    assert "a runner container given /dev/dri/renderD130 sees 1 GPU(s): 0000:0c:00.0" in done.stdout
    runs = [argv for argv in host.argvs("docker") if argv[0] == "run"]
    assert [argv[argv.index("--entrypoint") + 1] for argv in runs] == ["amd-smi", "amd-smi"]
    assert all(ROCM_IMAGE in argv and "/dev/kfd" in argv for argv in runs)


def test_host_check_fails_an_agent_whose_render_node_is_another_gpu_s(host):
    path = host.root / "etc" / "systemd" / "system" / "buildkite-agent-gpu1.service"
    path.write_text(path.read_text().replace("renderD131", "renderD130"))
    done = check(host)
    assert done.returncode == 1
    assert lines(done)["gpu1", "unit"] == "FAIL" and lines(done)["gpu0", "unit"] == "OK"
    assert "KERNELBOT_RENDER_NODE=/dev/dri/renderD130 (expected /dev/dri/renderD131)" in done.stdout


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    build = tmp_path / "build"
    (build / "deploy" / "buildkite").mkdir(parents=True)
    shutil.copy2(REPO / "deploy" / "buildkite" / "run-job.sh", build / "deploy" / "buildkite" / "run-job.sh")
    return build


def agent_env(host: FakeHost, index: int, **extra: str) -> dict[str, str]:
    """The job's environment as the agent's unit gives it."""
    values = dict(line.removeprefix("Environment=").split("=", 1) for line in unit(host, index).splitlines()
                  if line.startswith("Environment="))
    return host.env(**values, **extra)


def test_an_amd_job_runs_the_runner_image_with_kfd_and_its_own_render_node_only(host, checkout):
    env = agent_env(host, 1, SUBMISSION_PAYLOAD=encode_payload(tiny_payload()))
    done = subprocess.run([str(checkout / "deploy/buildkite/run-job.sh")], cwd=checkout, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    run = [argv for argv in host.argvs("docker") if argv[0] == "run"][0]
    devices = [run[i + 1] for i, arg in enumerate(run) if arg == "--device"]
    assert devices == ["/dev/kfd", "/dev/dri/renderD131"] and "--gpus" not in run
    assert ROCM_IMAGE in run and run[run.index("--cgroup-parent") + 1] == "buildkite-gpu1.slice"
    assert run[run.index("--network") + 1] == "none"
    assert json.loads((checkout / "result.json").read_text())["runs"]["test"]["run"]["passed"] is True


def test_an_amd_job_without_its_render_node_is_refused_before_any_container(host, checkout):
    env = agent_env(host, 0, SUBMISSION_PAYLOAD="x")
    env.pop("KERNELBOT_RENDER_NODE")
    done = subprocess.run([str(checkout / "deploy/buildkite/run-job.sh")], cwd=checkout, env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != 0 and "no KERNELBOT_RENDER_NODE" in done.stderr
    assert host.argvs("docker") == []


def test_the_all_gpus_script_counts_the_amd_gpus_amd_smi_lists(tmp_path):
    host = FakeHost(tmp_path)
    host.write_token("bkat_x")
    host.amd_gpus(3, tools=("amd-smi",))
    done = subprocess.run([str(REPO / "deploy" / "buildkite" / "setup-agents.sh"), "--vendor", "amd", "--gpu", "mi300",
                           "--root", str(host.root)], env=host.env(), capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "amd-MI300: {backend: buildkite, queues: [amd-mi300-0, amd-mi300-1, amd-mi300-2]}" in done.stdout
    assert "KERNELBOT_RENDER_NODE=/dev/dri/renderD132" in unit(host, 2)
