"""Released popcorn-cli's `submit --profile` on an NVIDIA host, over real HTTP, through the real route, dispatcher,
runner and harness: the host's `nvidia-smi` and `ncu` are stand-ins in the tools' own formats
(tests/support/fakes/gpu_profilers.py; no GPU here), the report several megabytes as real ones are. The answer is
checked as the client's `save_hosted_results` checks it (tests/support/popcorn_profile.py)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import uuid
from pathlib import Path

import pytest

from schemas.contracts import PyConfig, Task
from schemas.events import LeaderboardCreated
from services.cli.bundled import parse_deadline
from tests.support.fakes import gpu_profilers
from tests.support.in_process import InProcessPlatform
from tests.support.platform import SECRET_SEED
from tests.support.popcorn_profile import profile_request, read_stream, save_hosted_results

pytestmark = pytest.mark.slow

WORKLOAD = (Path(__file__).parents[1] / "support" / "fake_gpu_workload.py").read_text()
HOT = "hot_gemm(float const*, float const*, float*, int)"
REPORT_BYTES = 3 * 1024 * 1024  # random, so the zip stays as large: past NATS's 1 MB default and the old inline cap


def fake_gpu_board() -> LeaderboardCreated:
    task = Task(lang="py", files={"eval.py": WORKLOAD, "submission.py": "@SUBMISSION@"},
                config=PyConfig(main="eval.py"), benchmarks=[{"n": 4096}, {"n": 8192}], harness="problem")
    digest = hashlib.sha256(task.model_dump_json().encode()).hexdigest()
    return LeaderboardCreated(name="fakegemm", task=task, task_hash=digest, gpus=["cpu"],
                              deadline=parse_deadline("2100-01-01"), secret_seed=SECRET_SEED, visibility="public")


@pytest.fixture
def platform(nats_url: str, database_url: str, tmp_path, monkeypatch):
    # beside the interpreter, one of the few host places a run's sandbox shows (runner/confinement/bwrap.py): a
    # real host's ncu lives under /usr or /opt, which it shows too
    tools = Path(sys.prefix) / f".kb-test-tools-{uuid.uuid4().hex[:12]}"
    gpu_profilers.install(tools, report_bytes=REPORT_BYTES, nvidia_smi="NVIDIA H100 80GB HBM3")
    monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")  # what the local runner and its harness inherit
    running = InProcessPlatform(nats_url, database_url, tmp_path, extra_env={"KB_WARM_RUNNER": "false"})
    try:
        running.start()
        running.add_boards(fake_gpu_board())
        yield running
    finally:
        running.stop()
        shutil.rmtree(tools, ignore_errors=True)


def test_a_multi_megabyte_ncu_capture_reaches_the_released_client_inline_with_its_options_applied(platform):
    alice = platform.register("2101", "alice")
    headers, body = profile_request(alice, "submission.py", b"def custom_kernel(data):\n    return data\n",
                                    benchmark_index=1, ncu_kernel_name=HOT, ncu_kernel_name_base="demangled",
                                    ncu_launch_count=5)
    with platform.http.stream("POST", "/profile/fakegemm/cpu", headers=headers, content=body,
                              timeout=240) as response:
        assert response.status_code == 200, response.read()
        _, event, data = read_stream(response)
    assert event == "result", data

    (saved,) = save_hosted_results(data)  # raises with the client's own message where it would refuse
    (case,) = saved["runs"].values()
    assert case["spec"] == "n: 8192"
    report = case["files"]["profile.ncu-rep"]
    assert len(report) > REPORT_BYTES
    start = len(gpu_profilers.REPORT_MAGIC) + 8
    captured = json.loads(report[start:start + int.from_bytes(report[len(gpu_profilers.REPORT_MAGIC):start], "big")])
    # the whole demangled name matched (the default `function` base would have matched nothing by it)
    assert [launch["name"] for launch in captured] == [HOT]
    assert "ncu-details.csv" in case["files"]

    manifest = saved["manifest"]
    assert manifest["system"]["runtime"] == "CUDA" and manifest["system"]["gpu"] == "NVIDIA H100 80GB HBM3"
    metadata = manifest["profile_metadata"]
    assert metadata["capture_options"] == {"benchmark_index": 1, "ncu_kernel_name": HOT,
                                           "ncu_kernel_name_base": "demangled", "ncu_launch_count": 5}
    assert metadata["benchmark_specs"] == {"1": {"n": 8192}} and len(metadata["config_sha256"]) == 64

    (artifact,) = data["artifacts"]  # the link stays, beside the inline trace
    downloaded = platform.http.get(artifact["url"], headers={"X-Popcorn-Cli-Id": alice})
    assert downloaded.status_code == 200 and len(downloaded.content) == artifact["size"] > REPORT_BYTES
