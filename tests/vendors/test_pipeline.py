"""deploy/buildkite/pipeline.yml as Buildkite renders it at upload time, and its step run by a GPU agent.

Buildkite interpolates `$VAR`, `${VAR}` and `${VAR:-default}` when the pipeline is uploaded, on the uploading agent;
`$$` stays a literal `$`. Every job must use the CUDA_VISIBLE_DEVICES of the agent that runs it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from runner.task.payload import encode_payload
from schemas.contracts import RunPayload
from schemas.streams import RUNNER_REPORTS
from tests.runner.test_runner_container import declare, events_of
from tests.support.fakes.host import REPO, FakeHost

pytestmark = pytest.mark.slow

PIPELINE = REPO / "deploy" / "buildkite" / "pipeline.yml"
REFERENCE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?[-?]([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def interpolate(text: str, env: dict[str, str]) -> str:
    """Buildkite's upload-time interpolation (the subset pipelines use)."""
    def replace(match: re.Match) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1) or match.group(3)
        default = match.group(2)
        return env.get(name) or (default if default is not None else "")

    return REFERENCE.sub(replace, text)


def rendered(env: dict[str, str]) -> dict:
    return yaml.safe_load(interpolate(PIPELINE.read_text(), env))


def test_the_uploading_agent_s_gpu_never_reaches_the_rendered_pipeline():
    one = rendered({"GPU_QUEUE": "nvidia-h100-3", "CUDA_VISIBLE_DEVICES": "7"})
    other = rendered({"GPU_QUEUE": "nvidia-h100-3", "CUDA_VISIBLE_DEVICES": "5"})
    assert one == other
    [step] = one["steps"]
    assert step["agents"] == {"queue": "nvidia-h100-3"}  # the dispatcher's choice, from the build env
    assert step["command"] == "deploy/buildkite/run-job.sh"  # a script of the checkout (no-command-eval agents)
    assert step["artifact_paths"] == ["result.json"]


def test_only_the_queue_is_resolved_at_upload_time():
    text = "\n".join(line.split("#", 1)[0] for line in PIPELINE.read_text().splitlines())  # comments aside
    unescaped = {m.group(1) or m.group(3) for m in REFERENCE.finditer(text) if m.group(0) != "$$"}
    assert unescaped == {"GPU_QUEUE"}


@pytest.fixture
def agent(tmp_path: Path) -> tuple[FakeHost, Path]:
    """A GPU agent's build directory: the checked-out pipeline script, and the runner image present."""
    host = FakeHost(tmp_path / "host")
    checkout = tmp_path / "build"
    (checkout / "deploy" / "buildkite").mkdir(parents=True)
    shutil.copy2(REPO / "deploy" / "buildkite" / "run-job.sh", checkout / "deploy" / "buildkite" / "run-job.sh")
    host.local_image("kernelbot-runner:latest", "sha256:runner")
    return host, checkout


def tiny_payload() -> RunPayload:
    harness = ("import os\nout = os.fdopen(int(os.environ['POPCORN_FD']), 'w')\n"
               "out.write('test-count: 1\\ntest.0.status: pass\\ncheck: pass\\n')\n")
    return RunPayload(run_id="pipeline-1", gpu="nvidia-h100", lang="py", mode="test", main="eval.py",
                      sources={"eval.py": harness}, tests=[{"size": 1}])


def run_step(agent, gpu_index: str, payload_text: str) -> subprocess.CompletedProcess:
    host, checkout = agent
    [step] = rendered({"GPU_QUEUE": f"nvidia-h100-{gpu_index}", "CUDA_VISIBLE_DEVICES": "7"})["steps"]
    env = host.env(CUDA_VISIBLE_DEVICES=gpu_index, SUBMISSION_PAYLOAD=payload_text)  # the GPU agent's own
    return subprocess.run([str(checkout / step["command"])], cwd=checkout, env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def test_the_step_runs_the_image_on_the_agent_s_own_gpu_without_network_and_leaves_result_json(agent):
    host, checkout = agent
    done = run_step(agent, "3", encode_payload(tiny_payload()))
    assert done.returncode == 0, done.stderr
    run, handback = [argv for argv in host.argvs("docker") if argv[0] == "run"]
    assert run[run.index("--gpus") + 1] == "device=3"
    # the runner writes as the container's root; the agent's user gets its directory back to copy and remove it
    assert handback[handback.index("--entrypoint") + 1] == "chown"
    assert f"{os.getuid()}:{os.getgid()}" in handback
    assert run[run.index("--network") + 1] == "none"
    assert "kernelbot.gpu-index=3" in run  # how update-image.sh --auto sees a busy agent
    assert run[run.index("--cgroup-parent") + 1] == "buildkite-gpu3.slice"  # the slice's limits bound the run
    assert "SUBMISSION_PAYLOAD" not in " ".join(run)  # the payload travels in a private file, not the command
    result = (checkout / "result.json").read_text()
    assert '"passed": true' in result


def test_a_job_on_an_agent_without_its_gpu_variable_fails_saying_why(agent):
    host, checkout = agent
    env = host.env(SUBMISSION_PAYLOAD="x")
    done = subprocess.run([str(checkout / "deploy/buildkite/run-job.sh")], cwd=checkout, env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != 0
    assert "no CUDA_VISIBLE_DEVICES" in done.stderr
    assert host.argvs("docker") == []


def test_an_agent_with_a_runner_identity_reports_the_result_itself_from_a_second_container(agent, nats_url):
    """The run container has no network; a second one, running no submitted code, publishes the result under the
    runner's own subject (runner.<name>.run.completed) with the run id the build carries."""

    host, checkout = agent
    declare(nats_url)
    env = host.env(CUDA_VISIBLE_DEVICES="2", SUBMISSION_PAYLOAD=encode_payload(tiny_payload()),
                   KERNELBOT_RUN_ID="pipeline-1", KB_NATS_URL=nats_url, KB_RUNNER_NAME="nebius")
    done = subprocess.run([str(checkout / "deploy/buildkite/run-job.sh")], cwd=checkout, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    runs = [argv for argv in host.argvs("docker") if argv[0] == "run"]
    assert len(runs) == 3
    job, _, report = runs
    assert job[job.index("--network") + 1] == "none" and "KB_NATS_URL" not in " ".join(job)
    assert report[report.index("--entrypoint") + 1] == "python" and "runner.report" in report
    assert nats_url not in " ".join(report)  # the credentials travel in the environment, not on a command line
    reports = [(subject, body) for subject, _, body in events_of(nats_url, RUNNER_REPORTS.name)]
    assert [subject for subject, _ in reports] == ["runner.nebius.run.completed"]
    assert reports[0][1]["run_id"] == "pipeline-1"
    assert reports[0][1]["result"]["runs"]["test"]["run"]["passed"] is True
