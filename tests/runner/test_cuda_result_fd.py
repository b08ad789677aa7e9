"""Issue #16 item 5: a C++ submission that writes a forged verdict to the result fd
(runner/conformance/sources/fd_static_init.cu, which `kernelbot conformance` also runs).

The forger's static initializer writes a complete, consistent passing result to every descriptor from 3 up and
exits 0. Linked into a harness that holds the result pipe in its own process, as eval.cu did before, that is a
passing stage. Through the runner, the bundled CUDA problem now runs supervisor.out, which owns the pipe and starts
the submission's binary as a worker with only its request/reply pipes: the forgery breaks the frame protocol and
every case fails. Everything here runs without a GPU (nvcc compiles; the forgery acts before any CUDA call).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

import runner
from problems import PROBLEMS_ROOT
from runner.confinement.environment import scrubbed_environment
from runner.stages.cuda import BINARY_NAME, compile_cuda, find_nvcc
from runner.stages.execute import execute
from runner.task.payload import build_payload
from runner.task.protocol import judge_stage
from runner.task.taskfile import load_problem
from services.scorer.scoring import verdict_of

PROBLEM = PROBLEMS_ROOT / "cuda_examples" / "vectoradd_cu"
FORGER = (Path(runner.__file__).parent / "conformance" / "sources" / "fd_static_init.cu").read_text()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")]


def payload(mode: str = "test"):
    return build_payload(load_problem(PROBLEM).task, FORGER, run_id="forger", gpu="H100", mode=mode, secret=False,
                         seed=None, arch="90a")


def test_the_forgery_passes_a_harness_that_hands_the_submission_the_result_fd(tmp_path):
    """The exploit is real: the forger's binary, given the result pipe as eval.cu's single process had it, produces
    a verdict the runner's consistency checks accept."""
    forged = payload()
    for name, content in {**forged.headers, **forged.sources}.items():
        (tmp_path / name).write_text(content)
    compilation = compile_cuda(forged, tmp_path, scrubbed_environment())
    assert compilation.success, compilation.stderr[-3000:]
    (tmp_path / "cases.txt").write_text("size: 1; seed: 4242\nsize: 127; seed: 5236\n")
    read_end, write_end = os.pipe()
    try:
        done = subprocess.run([f"./{BINARY_NAME}", "test", "cases.txt"], cwd=tmp_path, pass_fds=(write_end,),
                              env={"PATH": os.environ.get("PATH", ""), "POPCORN_FD": str(write_end)},
                              capture_output=True, timeout=60, check=False)
    finally:
        os.close(write_end)
        with os.fdopen(read_end) as pipe:
            channel = pipe.read()
    assert done.returncode == 0
    verdict = judge_stage(channel, "test", expected_cases=2)
    assert verdict.passed and verdict.result["test.1.spec"] == "size: 127; seed: 5236", channel


def test_through_the_runner_the_forged_verdict_never_reaches_the_result_pipe():
    result = execute(payload("leaderboard"))
    assert result.success, result.error
    assert list(result.runs) == ["test"]  # the ranked chain stops at the first stage
    stage = result.runs["test"]
    assert stage.compilation.success and "supervisor" not in stage.compilation.command  # the user's build
    assert stage.run.command.startswith("./supervisor.out test ")
    assert stage.harness["kind"] == "kernelbot" and stage.harness["protected"] == "true"
    assert stage.run.exit_code == 112 and not stage.run.passed
    run = stage.run.result
    assert run["check"] == "fail" and run["test-count"] == str(len(load_problem(PROBLEM).task.tests))
    assert all(run[f"test.{i}.error"] == "worker protocol violation: bad frame header"
               for i in range(int(run["test-count"])))
    assert not verdict_of(result, "leaderboard", "geom").passed
