"""`kernelbot conformance` on this host, which has no GPU: it runs what it can (our Python harness on the CPU, the
C++ forged-verdict exploit, which acts before any CUDA call, when nvcc exists) and reports every other check as
skipped with the reason, one line each, then the summary. tests/gpu runs the same checks where a GPU exists."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from problems import PROBLEMS_ROOT
from runner.conformance import CHECKS, HostCapabilities, checks
from runner.conformance.checks import side_stream
from runner.conformance.report import CheckResult, summary_line
from runner.conformance.runs import TRUTH_BINARY, CudaBuild, Outcome
from runner.stages.cuda import find_nvcc
from runner.stages.cuda_supervisor import SUPERVISOR_NAME
from runner.task.taskfile import load_problem
from schemas.contracts import FullResult, SystemInfo

pytestmark = pytest.mark.slow

KERNELBOT = Path(sys.executable).parent / "kernelbot"


def test_on_a_cpu_host_it_runs_what_it_can_and_skips_the_rest():
    host = HostCapabilities.detect()
    assert host.gpus == 0, "this test describes a host without a GPU; tests/gpu covers the others"
    done = subprocess.run([str(KERNELBOT), "conformance"], capture_output=True, text=True, timeout=900, check=False,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})
    lines = [line for line in done.stdout.splitlines() if line.split(" ", 1)[0] in ("PASS", "FAIL", "SKIP")]
    assert [line.split()[1].rstrip(":") for line in lines] == list(CHECKS), done.stdout
    status = {line.split()[1].rstrip(":"): line.split()[0] for line in lines}
    runnable = {"py_harness_correct", "py_fake_events"} | ({"cu_fd_static_init"} if host.nvcc else set())
    assert {name for name, value in status.items() if value == "PASS"} == runnable, done.stdout + done.stderr
    assert all(value == "SKIP" for name, value in status.items() if name not in runnable), done.stdout
    assert "SKIP timing_noise: needs a CUDA GPU; this host has none" in lines
    assert "SKIP nccl_two_rank: needs two GPUs; this host has 0" in lines
    assert done.stdout.splitlines()[-1] == f"{len(runnable)} passed, 0 failed, {len(CHECKS) - len(runnable)} " \
                                           f"skipped on no GPU (CPU only), nvcc {'found' if host.nvcc else 'missing'}"
    assert done.returncode == 0


def test_the_summary_counts_and_a_failure_makes_the_command_fail(tmp_path):
    results = [CheckResult("a", "pass"), CheckResult("b", "fail", "why"), CheckResult("c", "skip", "no GPU")]
    assert [result.line() for result in results] == ["PASS a", "FAIL b: why", "SKIP c: no GPU"]
    assert summary_line(results, "host") == "1 passed, 1 failed, 1 skipped on host"
    done = subprocess.run([str(KERNELBOT), "conformance", "--only", "nope"], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 2 and "unknown check 'nope'" in done.stderr


def test_the_cuda_sources_of_the_gpu_checks_compile(tmp_path):
    """What cannot run here is at least compiled: the C++ exploits of the GPU checks and the CUDA-graph ground truth,
    against the bundled problem's headers, with the harness's C++ standard and the H100 architecture."""
    import pytest


    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc is not installed")
    sources = Path(__file__).parents[2] / "runner" / "conformance" / "sources"
    problem = PROBLEMS_ROOT / "cuda_examples" / "vectoradd_cu"
    for header in problem.glob("*.cuh"):
        (tmp_path / header.name).write_text(header.read_text())
    names = sorted(path.name for path in sources.glob("*.cu"))
    assert names == ["fd_from_kernel.cu", "fd_static_init.cu", "graph_truth.cu", "keeps_running.cu",
                     "same_work.cu", "side_stream.cu"]
    for name in names:
        (tmp_path / name).write_text((sources / name).read_text())
    done = subprocess.run([nvcc, "--std=c++20", "-O3", "--default-stream=per-thread", "-c",
                           "-gencode=arch=compute_90a,code=sm_90a", *names], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert all((tmp_path / name.replace(".cu", ".o")).is_file() for name in names)


def test_the_timing_noise_build_compiles_worker_supervisor_and_graph_truth(tmp_path):
    """The timing-noise check's one build (runner/conformance/runs.py), as far as a host without a GPU gets: the
    three binaries link; running them needs a GPU."""
    import pytest


    if find_nvcc() is None:
        pytest.skip("nvcc is not installed")
    problem = load_problem(Path(__file__).parents[2] / "problems" / "cuda_examples" / "vectoradd_cu")
    build = CudaBuild(tmp_path, (problem.directory / "submission.cu").read_text())
    assert build.problem == "", build.problem
    assert all((tmp_path / name).is_file() for name in ("eval.out", SUPERVISOR_NAME, TRUTH_BINARY))
    assert "--default-stream=per-thread" in build.compilations[2].command


def _outcome(error: str = "", mean_ns: float | None = None):

    return Outcome(passed=not error, error=error, mean_ns=mean_ns,
                   result=FullResult(success=True, system=SystemInfo(gpu="conformance"), runs={}))


@pytest.mark.parametrize(("name", "error", "status"), [
    ("cu_keeps_running", "timed call 3: 4096 mismatched elements; first at 0: got 0, expected 1", "pass"),
    ("cu_keeps_running", "unsynchronized work or timer tampering detected", "pass"),
    ("cu_keeps_running", "compilation failed: eval.cu(12): error", "fail"),  # any refusal passed before
    ("cu_keeps_running", "", "fail"),
    ("cu_fd_from_kernel", "worker protocol violation: bad frame header", "pass"),
    ("cu_fd_from_kernel", "the worker exited (exit code 0)", "fail"),  # the forgery never reached the pipe
    ("cu_side_stream", "timed call 1: 4096 mismatched elements; first at 0: got 0, expected 1", "pass"),
    ("cu_side_stream", "compilation failed: side_stream.cu(3): error", "fail"),
])
def test_a_gpu_check_passes_only_a_refusal_for_the_reason_it_expects(monkeypatch, name, error, status):
    """The checks' verdicts on what eval.cu answered, without a GPU: each run is replaced by the outcome given (the
    same-stream control of a side-stream check passes)."""

    monkeypatch.setattr(checks, "source", lambda file: f"// {file}")
    monkeypatch.setattr(checks, "run", lambda task, code, *args: _outcome("", 1000.0) if "same_work" in code
                        else _outcome(error))
    monkeypatch.setattr(checks, "cuda_task", lambda: None)
    host = checks.HostCapabilities(gpus=1, gpu_name="H100", nvcc="/usr/local/bin/nvcc")
    [result] = checks.run_checks([name], host=host)
    assert result.status == status, result.line()


@pytest.mark.parametrize(("cheat_ns", "status"), [(1000.0, "pass"), (920.0, "pass"), (850.0, "fail"), (500.0, "fail")])
def test_a_side_stream_cheat_may_not_look_faster_than_the_noise_allows(cheat_ns, status):

    result = side_stream("cu_side_stream", _outcome("", 1000.0), _outcome("", cheat_ns))
    assert result.status == status, result.line()
