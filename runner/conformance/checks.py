"""The conformance checks, one function each, and the run over all of them (see __init__.py)."""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from runner.stages.cuda import find_nvcc

from . import pytasks
from .report import CheckResult, failed, passed, skipped
from .runs import CudaBuild, cuda_task, run, source

NOISE_TARGET_NS, NOISE_START_SIZE = 10_000.0, 1 << 21
CV_GOAL, BIAS_GOAL_NS = 0.005, 500.0
# A side-stream submission runs the very kernel of the same-stream control, with the same launch shape; only the
# stream differs, and every sample is closed by a device-wide synchronize. So it may look faster only by the timing
# noise (CV goal 0.5 %) and a launch's share: 10 % covers both, and no cheat more than 1.11x faster passes (0.5, the
# old floor, let one 2x faster through).
SIDE_STREAM_FLOOR = 0.9
# The refusals of eval.cu (problems/cuda_examples/eval.cu) a check may expect: a check naming none would pass a
# submission refused for any reason, a broken build included.
PROTOCOL_VIOLATION = "worker protocol violation"
MISMATCHED = "mismatched elements"
TAMPERING = "unsynchronized work or timer tampering detected"
# Vector length of the Python checks: a GPU gets a real kernel; a CPU host a short one, because the CPU harness's
# cross-check (host clock vs reported time) counts every preemption inside a call, and long calls on a busy host
# get preempted.
PY_SIZE_GPU, PY_SIZE_CPU = 1 << 20, 1 << 12


@dataclass(frozen=True)
class HostCapabilities:
    gpus: int
    gpu_name: str
    nvcc: str | None

    @staticmethod
    def detect() -> HostCapabilities:
        try:
            import torch

            count = torch.cuda.device_count() if torch.cuda.is_available() else 0
            name = torch.cuda.get_device_name(0) if count else ""
        except Exception:  # noqa: BLE001 - no usable torch/CUDA: a CPU host
            count, name = 0, ""
        return HostCapabilities(count, name, find_nvcc())

    def describe(self) -> str:
        gpus = f"{self.gpus} x {self.gpu_name}" if self.gpus else "no GPU (CPU only)"
        return f"{gpus}, nvcc {'found' if self.nvcc else 'missing'}"


Check = Callable[[HostCapabilities, int], CheckResult]
NO_GPU = "needs a CUDA GPU; this host has none"
NO_NVCC = "needs nvcc"


def refused(name: str, outcome, reason: str, *alternatives: str) -> CheckResult:
    """Passed when the submission was refused for one of the expected reasons (at least one is required)."""
    if outcome.passed:
        return failed(name, f"not refused: it passed with mean {outcome.mean_ns} ns")
    if not any(expected in outcome.error for expected in (reason, *alternatives)):
        return failed(name, f"refused for an unexpected reason: {outcome.error}")
    return passed(name, f"refused: {outcome.error}")


# ---- our Python harness ------------------------------------------------------------------------------------------


def _vectoradd(host: HostCapabilities):
    return pytasks.vectoradd_task(PY_SIZE_GPU if host.gpus else PY_SIZE_CPU)


def py_harness_correct(host: HostCapabilities, repeats: int) -> CheckResult:
    outcome = run(_vectoradd(host), pytasks.CORRECT)
    where = "on the GPU" if host.gpus else "on the CPU"
    if not outcome.passed:
        return failed("py_harness_correct", f"a correct submission failed {where}: {outcome.error}")
    leaderboard = outcome.result.runs["leaderboard"].run  # ran and passed, as outcome.passed says
    timer = leaderboard.result.get("benchmark.0.timer") if leaderboard else None
    if timer != ("cuda-event" if host.gpus else "cpu-perf-counter"):
        return failed("py_harness_correct", f"ranked {where}, but recorded timer {timer!r}")
    return passed("py_harness_correct", f"ranked {where} ({timer}), mean {outcome.mean_ns:.0f} ns")


def py_fake_events(host: HostCapabilities, repeats: int) -> CheckResult:
    return refused("py_fake_events", run(_vectoradd(host), pytasks.FAKE_EVENTS), "timer tampering detected")


def py_side_stream(host: HostCapabilities, repeats: int) -> CheckResult:
    if not host.gpus:
        return skipped("py_side_stream", NO_GPU)
    return side_stream("py_side_stream", run(_vectoradd(host), pytasks.SAME_STREAM),
                       run(_vectoradd(host), pytasks.SIDE_STREAM))


def side_stream(name: str, honest, cheat) -> CheckResult:
    if not honest.passed:
        return failed(name, f"the same-stream control failed: {honest.error}")
    if not cheat.passed:  # its output was not there when checked, or the supervisor saw the hidden work
        return refused(name, cheat, MISMATCHED, TAMPERING)
    ratio = cheat.mean_ns / honest.mean_ns
    detail = f"side stream {cheat.mean_ns:.0f} ns vs same stream {honest.mean_ns:.0f} ns ({ratio:.2f}x)"
    return (passed if ratio >= SIDE_STREAM_FLOOR else failed)(name, detail, ratio=ratio)


def nccl_two_rank(host: HostCapabilities, repeats: int) -> CheckResult:
    if host.gpus < 2:
        return skipped("nccl_two_rank", f"needs two GPUs; this host has {host.gpus}")
    outcome = run(pytasks.all_reduce_task(), pytasks.ALL_REDUCE)
    if not outcome.passed:
        return failed("nccl_two_rank", f"a correct two-rank all-reduce failed: {outcome.error}")
    return passed("nccl_two_rank", f"two ranks over NCCL ranked, mean {outcome.mean_ns:.0f} ns")


# ---- eval.cu -----------------------------------------------------------------------------------------------------


def _cuda_requirements(host: HostCapabilities, needs_gpu: bool = True) -> str:
    if host.nvcc is None:
        return NO_NVCC
    return NO_GPU if needs_gpu and not host.gpus else ""


def cuda_problem_correct(host: HostCapabilities, repeats: int) -> CheckResult:
    missing = _cuda_requirements(host)
    if missing:
        return skipped("cuda_problem_correct", missing)
    outcome = run(cuda_task(), source_of_problem("submission.cu"))
    if not outcome.passed:
        return failed("cuda_problem_correct", outcome.error)
    return passed("cuda_problem_correct", f"ranked, mean {outcome.mean_ns:.0f} ns")


def cuda_problem_wrong(host: HostCapabilities, repeats: int) -> CheckResult:
    missing = _cuda_requirements(host)
    if missing:
        return skipped("cuda_problem_wrong", missing)
    wrong = source_of_problem("solutions/wrong/returns_input.cu")
    return refused("cuda_problem_wrong", run(cuda_task(), wrong, "test"), "returned an input buffer")


def cu_fd_static_init(host: HostCapabilities, repeats: int) -> CheckResult:
    missing = _cuda_requirements(host, needs_gpu=False)  # the forgery acts before any CUDA call
    if missing:
        return skipped("cu_fd_static_init", missing)
    return refused("cu_fd_static_init", run(cuda_task(), source("fd_static_init.cu")), PROTOCOL_VIOLATION)


def cu_fd_from_kernel(host: HostCapabilities, repeats: int) -> CheckResult:
    missing = _cuda_requirements(host)
    if missing:
        return skipped("cu_fd_from_kernel", missing)
    # The forged lines land on the worker's reply pipe before it exits, so the supervisor reads a bad frame header
    # first: "the worker exited" would mean the forgery never reached the pipe, which the check must not take for
    # a defence.
    return refused("cu_fd_from_kernel", run(cuda_task(), source("fd_from_kernel.cu")), PROTOCOL_VIOLATION)


def cu_side_stream(host: HostCapabilities, repeats: int) -> CheckResult:
    missing = _cuda_requirements(host)
    if missing:
        return skipped("cu_side_stream", missing)
    return side_stream("cu_side_stream", run(cuda_task(), source("same_work.cu")),
                       run(cuda_task(), source("side_stream.cu")))


def cu_keeps_running(host: HostCapabilities, repeats: int) -> CheckResult:
    missing = _cuda_requirements(host)
    if missing:
        return skipped("cu_keeps_running", missing)
    # The late kernel's output is not there when it is checked right after the call, or, where it lands in time,
    # the supervisor's clock saw work the events did not (keeps_running.cu).
    return refused("cu_keeps_running", run(cuda_task(), source("keeps_running.cu")), MISMATCHED, TAMPERING)


def timing_noise(host: HostCapabilities, repeats: int) -> CheckResult:
    """CV of the benchmark mean over `repeats` runs of a ~10 us kernel, and its bias against a CUDA-graph ground
    truth (goals: CV <= 0.5 %, |bias| <= 0.5 us)."""
    missing = _cuda_requirements(host)
    if missing:
        return skipped("timing_noise", missing)
    with tempfile.TemporaryDirectory(prefix="kb-conformance-") as directory:
        build = CudaBuild(Path(directory), source_of_problem("submission.cu"))
        if build.problem:
            return failed("timing_noise", build.problem)
        start = build.truth_ns(NOISE_START_SIZE)
        size = int(min(max(NOISE_START_SIZE * NOISE_TARGET_NS / max(start, 1.0), 1 << 14), 1 << 27))
        truth = build.truth_ns(size)
        means = [build.benchmark_mean(size) for _ in range(repeats)]
    mean = statistics.fmean(means)
    cv = statistics.stdev(means) / mean if len(means) > 1 else 0.0
    bias = mean - truth
    detail = (f"size {size}: mean {mean / 1e3:.3f} us over {repeats} runs, CV {cv * 100:.3f} % (goal <= 0.5 %), "
              f"graph truth {truth / 1e3:.3f} us, bias {bias / 1e3:+.3f} us (goal <= 0.5 us)")
    meets = cv <= CV_GOAL and abs(bias) <= BIAS_GOAL_NS
    return (passed if meets else failed)("timing_noise", detail, mean_ns=mean, cv=cv, truth_ns=truth, bias_ns=bias)


def source_of_problem(relative: str) -> str:
    from .runs import CUDA_PROBLEM

    return (CUDA_PROBLEM / relative).read_text(encoding="utf-8")


CHECKS: dict[str, Check] = {check.__name__: check for check in (
    py_harness_correct, py_fake_events, py_side_stream, cuda_problem_correct, cuda_problem_wrong, cu_fd_static_init,
    cu_fd_from_kernel, cu_side_stream, cu_keeps_running, timing_noise, nccl_two_rank,
)}


def run_checks(names: list[str] | None = None, repeats: int = 10, host: HostCapabilities | None = None,
               on_result: Callable[[CheckResult], None] | None = None) -> list[CheckResult]:
    """Run the named checks (all by default) in order; a check that raises is a failure with the exception."""
    host = host or HostCapabilities.detect()
    results = []
    for name in names or list(CHECKS):
        try:
            result = CHECKS[name](host, repeats)
        except Exception as exc:  # noqa: BLE001 - one broken check must not hide the others
            result = failed(name, f"{type(exc).__name__}: {exc}")
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results
