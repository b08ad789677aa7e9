"""Remote runners (GitHub Actions, Buildkite, Slurm) hold user code to the rules of the local runner; Modal's warm
container has its own module (test_modal_container.py).

The shipped workflow and job files are read as their providers read them, and run here where this machine can:
the Buildkite step and the Slurm job execute for real (Docker is the recording stand-in of tests/support/fakes,
which runs the real runner).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from runner.task.payload import encode_payload
from tests.security.remote_payloads import payload_running, stdout_of
from tests.support.fakes.host import REPO, FakeHost

WORKFLOWS = ("nvidia_workflow.yml", "amd_workflow.yml", "helion_workflow.yml")
PRINT_ENVIRONMENT = """
import os
print("ENV", sorted(os.environ.items()))
for pid in os.listdir("/proc"):  # what any process it can read was started with
    try:
        print("PROC", pid, open(f"/proc/{pid}/environ", "rb").read().decode("utf-8", "replace"))
    except OSError:
        pass
"""


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory every uid may traverse, as a runner's temporary directory or a node's /tmp is: what keeps user
    code out must then be the scripts' own doing, not the 0700 directory pytest keeps its files in."""
    path = Path(tempfile.mkdtemp(prefix="kb-remote-"))
    path.chmod(0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


# --- GitHub Actions ---------------------------------------------------------------------------------------------


def workflow(name: str) -> dict:
    data = yaml.safe_load((REPO / "deploy" / "github" / name).read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as a boolean
    return data


def steps(name: str) -> list[dict]:
    [job] = workflow(name)["jobs"].values()
    return job["steps"]


def commands(step: dict) -> list[list[str]]:
    """The shell commands of a `run:` step: continuation lines joined, comments dropped, `a && b` two commands."""
    found: list[list[str]] = []
    for line in step.get("run", "").replace("\\\n", " ").splitlines():
        argv: list[str] = []
        for word in shlex.split(line, comments=True):
            if word in ("&&", "||", ";"):
                found.append(argv)
                argv = []
            else:
                argv.append(word)
        found.append(argv)
    return [argv for argv in found if argv]


def payload_run(name: str) -> tuple[int, list[str]]:
    """The index of the step that runs the payload, and its `docker run` command."""
    found = [(index, argv) for index, step in enumerate(steps(name)) for argv in commands(step)
             if "--payload-file" in argv]
    assert len(found) == 1, f"{name}: expected one command running the payload, found {found}"
    index, argv = found[0]
    assert argv[:2] == ["docker", "run"], f"{name}: the payload must run in a container of its own: {argv}"
    return index, argv


def option(argv: list[str], name: str) -> list[str]:
    values = [argv[i + 1] for i, arg in enumerate(argv) if arg == name]
    return values + [arg.split("=", 1)[1] for arg in argv if arg.startswith(name + "=")]


@pytest.mark.parametrize("name", WORKFLOWS)
def test_github_user_code_gets_no_host_ipc_and_no_job_container_options(name):
    [job] = workflow(name)["jobs"].values()
    # A job-level container would run every step, checkout and upload too, in one container with one set of options.
    assert "container" not in job, f"{name}: job container {job.get('container')}"
    text = " ".join(" ".join(argv) for step in steps(name) for argv in commands(step)) + yaml.safe_dump(job)
    for forbidden in ("--ipc host", "--ipc=host", "--privileged", "--pid host", "--pid=host", "--network host"):
        assert forbidden not in text, f"{name} uses {forbidden}"


@pytest.mark.parametrize("name", WORKFLOWS)
def test_github_user_code_runs_without_network_under_the_sandbox_s_uid(name):
    _, run = payload_run(name)
    assert option(run, "--network") == ["none"]
    assert "--rm" in run  # the container, and every process of the submission, is gone when the step ends
    # The runner must be root in the container (no --user) with CAP_SYS_ADMIN and the mounts AppArmor would refuse,
    # so that the sandbox can hand user code its per-run uid and namespaces.
    assert not option(run, "--user") and not option(run, "-u")
    assert "SYS_ADMIN" in option(run, "--cap-add")
    assert "apparmor=unconfined" in option(run, "--security-opt")
    # No python -m runner outside that container: nothing else runs submitted code on the VM.
    for step in steps(name):
        for argv in commands(step):
            if argv[:2] != ["docker", "run"]:
                assert not any(arg.startswith("runner") for arg in argv), f"{name} runs the runner on the VM"


@pytest.mark.parametrize("name", WORKFLOWS)
def test_github_payload_is_fetched_before_and_result_uploaded_after_the_run_container(name):
    index, run = payload_run(name)
    every = steps(name)
    taking = next(i for i, step in enumerate(every) if "GITHUB_EVENT_PATH" in step.get("run", ""))
    assert taking < index
    assert "curl" in every[taking]["run"]  # a payload passed as a link is fetched here, the container has no network
    mounts = {inside: host for host, inside in (volume.rsplit(":", 1) for volume in option(run, "--volume"))}
    # Only the payload's and the result's directories: not the workspace (its .git/config would hold the job's
    # GITHUB_TOKEN had checkout persisted it), not the Docker socket.
    assert set(mounts) == {"/in", "/out"} and not option(run, "-v") and not option(run, "--mount")
    # A prebuilt image: nothing of the repository is checked out on the VM (a checkout could persist the job's
    # GITHUB_TOKEN in .git/config), and nothing is built or installed per run.
    assert not [step for step in every if step.get("uses", "").startswith("actions/checkout")]
    assert not [argv for step in every for argv in commands(step) if argv[:2] in (["docker", "build"], ["pip", "install"])]
    result_dir = mounts["/out"]
    assert run[run.index("--result") + 1].startswith("/out/")
    private = [argv for argv in commands(every[taking]) if argv[:1] == ["mkdir"]]
    assert private and all(option(argv, "-m") == ["700"] for argv in private)
    assert any(result_dir in argv for argv in private), "the result directory is not created private"
    upload = next(i for i, step in enumerate(every) if step.get("uses", "").startswith("actions/upload-artifact"))
    assert upload > index
    assert every[upload]["with"]["path"] == "result.json" and every[upload]["with"]["name"] == "run-result"


@pytest.mark.parametrize("name", WORKFLOWS)
def test_github_workflow_inputs_are_the_ones_the_dispatcher_sends(name):
    data = workflow(name)
    inputs = set(data["on"]["workflow_dispatch"]["inputs"])
    assert inputs == ({"payload", "run_id", "runner"} if name.startswith("amd") else {"payload", "run_id"})
    assert data["run-name"] == "kernelbot ${{ inputs.run_id }}"


@pytest.mark.slow
def test_github_workflow_run_on_this_machine_keeps_the_result_out_of_user_code_s_reach(tmp_path, open_dir):
    """The NVIDIA workflow's steps executed in order (checkout and upload aside) with the recording Docker: a
    submission that looks for where the result goes (the runner's command line, in /proc: hidden by the sandbox's
    PID namespace, visible at limits-only) and tries to write it, or to leave a file beside it, fails, and the
    uploaded result.json is the runner's."""
    host = FakeHost(tmp_path / "host")
    host.publish_image("kernelbot-runner:test", "sha256:runner")  # the pull step fetches it
    hostile = """
import glob, os
targets = []
for cmdline in glob.glob("/proc/*/cmdline"):
    try:
        argv = open(cmdline, "rb").read().split(b"\\0")
    except OSError:
        continue
    if b"--result" in argv:
        targets.append(argv[argv.index(b"--result") + 1].decode())
print("TARGETS", targets)
for target in targets:
    for path in (target, os.path.join(os.path.dirname(target), "forged")):
        try:
            with open(path, "w") as out:
                out.write('{"success": true, "forged": true}')
            print("WROTE", path)
        except OSError as exc:
            print("REFUSED", path, exc.strerror)
"""
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"inputs": {"payload": encode_payload(payload_running(hostile, "gh-1")),
                                            "run_id": "gh-1"}}))
    workspace, runner_temp = open_dir / "workspace", open_dir / "runner-temp"
    workspace.mkdir()
    runner_temp.mkdir()
    env = host.env(GITHUB_EVENT_PATH=str(event), RUNNER_TEMP=str(runner_temp), KB_IMAGE="kernelbot-runner:test",
                   KB_CONTAINER="kernelbot-1-1")
    for step in steps("nvidia_workflow.yml"):
        if "run" not in step:
            continue
        done = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=workspace, env=env, capture_output=True,
                              text=True, timeout=180, check=False)
        assert done.returncode == 0, (step["name"], done.stderr)
    result = json.loads((workspace / "result.json").read_text())
    out = stdout_of(result)
    if result["isolation"] == "full":
        assert "TARGETS []" in out, out  # its own PID namespace: the runner's command line is not even visible
    else:
        assert "TARGETS []" not in out and "REFUSED" in out, out  # it found the result's path and was refused
    assert "WROTE" not in out, out
    assert "forged" not in result
    assert not (runner_temp / "kernelbot").exists()  # payload and private copies gone with the job


# --- Buildkite ---------------------------------------------------------------------------------------------------


AGENT_TOKEN = "bkaj_" + "f" * 40


@pytest.fixture
def buildkite_agent(tmp_path: Path) -> tuple[FakeHost, Path, Path]:
    """A GPU agent's build directory with the shipped job script, and a Docker that also records the environment
    each `docker` command was started with (what a daemon-side option like --env-file could hand on)."""
    host = FakeHost(tmp_path / "host")
    host.local_image("kernelbot-runner:latest", "sha256:runner")
    checkout = tmp_path / "build"
    (checkout / "deploy" / "buildkite").mkdir(parents=True)
    shutil.copy2(REPO / "deploy" / "buildkite" / "run-job.sh", checkout / "deploy" / "buildkite" / "run-job.sh")
    environments = tmp_path / "docker-environments"
    environments.mkdir()
    shim = host.bin / "docker"
    shim.rename(host.bin / "docker-shim")
    shim.write_text(f'#!/bin/sh\nenv > "{environments}/$$"\nexec "{host.bin / "docker-shim"}" "$@"\n')
    shim.chmod(0o755)
    return host, checkout, environments


@pytest.mark.slow
def test_buildkite_agent_token_reaches_neither_docker_nor_user_code(buildkite_agent, open_dir):
    host, checkout, environments = buildkite_agent
    payload = encode_payload(payload_running(PRINT_ENVIRONMENT, "bk-1", gpu="nvidia-h100"))
    env = host.env(CUDA_VISIBLE_DEVICES="1", SUBMISSION_PAYLOAD=payload, BUILDKITE_AGENT_ACCESS_TOKEN=AGENT_TOKEN,
                   BUILDKITE_BUILD_ID="0190-build", BUILDKITE_JOB_ID="0190-job", TMPDIR=str(open_dir))
    done = subprocess.run([str(checkout / "deploy/buildkite/run-job.sh")], cwd=checkout, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    result = (checkout / "result.json").read_text()
    assert "ENV" in stdout_of(json.loads(result))  # the submission ran and printed what it saw
    assert AGENT_TOKEN not in result
    seen = [path.read_text() for path in environments.iterdir()]
    assert seen and not [text for text in seen if AGENT_TOKEN in text], "docker was started holding the token"
    [run, *_] = [argv for argv in host.argvs("docker") if argv[0] == "run"]
    assert option(run, "--network") == ["none"] and not option(run, "--ipc") and "--privileged" not in run
    assert "apparmor=unconfined" in option(run, "--security-opt")  # the sandbox's mounts, so its per-run uid
    assert list(open_dir.iterdir()) == []  # the job's directory, which held the payload, is gone with the job


# --- Slurm -------------------------------------------------------------------------------------------------------


SLURM_JWT = "eyJhbGciOiJIUzI1NiJ9.slurm-jwt-of-the-submitting-user"


@pytest.mark.slow
def test_slurm_job_hands_user_code_no_cluster_credential_and_leaves_no_payload(tmp_path, open_dir):
    """The shipped job script runs as slurmrestd would run it, with an environment a site's prolog could give a
    job; the runner is the venv's (here: this interpreter with the checkout on its path)."""
    venv = tmp_path / "shared" / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH="{REPO}" exec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    run_dir = tmp_path / "shared" / "runs" / "sl-1"
    run_dir.mkdir(parents=True)
    payload_file = run_dir / "payload.txt"
    payload_file.write_text(encode_payload(payload_running(PRINT_ENVIRONMENT, "sl-1", gpu="A100-cluster")))
    payload_file.chmod(0o600)
    node_tmp = open_dir
    env = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8", "KERNELBOT_VENV": str(venv), "TMPDIR": str(node_tmp),
           "SLURM_JOB_ID": "42", "SLURM_JWT": SLURM_JWT, "CUDA_VISIBLE_DEVICES": "0"}
    done = subprocess.run(["bash", str(REPO / "deploy" / "slurm" / "kernelbot-job.sbatch"), str(payload_file),
                           str(run_dir / "result.json")], cwd=run_dir, env=env, capture_output=True, text=True,
                          timeout=180, check=False)
    assert done.returncode == 0, done.stderr
    result = (run_dir / "result.json").read_text()
    assert "ENV" in stdout_of(json.loads(result))
    assert SLURM_JWT not in result
    assert not payload_file.exists()
    assert list(node_tmp.iterdir()) == []  # the job's private directory is gone with it
