"""Run planning: which runs a submission becomes, and how long each may take. Pure."""

from __future__ import annotations

from collections.abc import Mapping

from schemas.contracts import ProfileOptions, RunPayload, Task
from schemas.events import PlannedRun
from services.core.rules import gpu_peaks

# docs/authoring.md: the warm-up or compile step before the stages has its own fixed budget.
COMPILE_BUDGET_S = 120


def plan_runs(submission_id: int, mode: str, gpus: list[str]) -> list[PlannedRun]:
    """Ranked submissions get a public and a secret-seed run per GPU; other modes one run per GPU."""
    runs = []
    for gpu in dict.fromkeys(gpus):  # a GPU named twice is still one run
        if mode == "leaderboard":
            runs.append(PlannedRun(run_id=f"{submission_id}.{gpu}.public", gpu=gpu, mode="leaderboard"))
            runs.append(PlannedRun(run_id=f"{submission_id}.{gpu}.secret", gpu=gpu, mode="private", secret=True))
        else:
            runs.append(PlannedRun(run_id=f"{submission_id}.{gpu}.{mode}", gpu=gpu, mode=mode))
    return runs


def with_floors(runs: list[PlannedRun], task: Task, peaks: Mapping[str, gpu_peaks.GpuPeak]) -> list[PlannedRun]:
    """Each ranked public run with its roofline floor per case, where the task declares one and the GPU's peaks
    are known (the scorer holds a score below it for review)."""
    planned = []
    for run in runs:
        floors = gpu_peaks.floors_ns(task.roofline, task.benchmarks, gpu_peaks.peak_of(run.gpu, peaks),
                                     task.multi_gpu) if run.mode == "leaderboard" else []
        planned.append(run.model_copy(update={"floor_ns": floors}) if floors else run)
    return planned


def rerun_runs(submission_id: int, gpus: list[str], rejudge_id: str) -> list[PlannedRun]:
    """A rerun repeats what ranks: a public and a secret-seed run per GPU, named after the rejudge."""
    return [PlannedRun(run_id=f"{submission_id}.{gpu}.{kind}.{rejudge_id}", gpu=gpu, mode=mode, secret=secret)
            for gpu in dict.fromkeys(gpus)
            for kind, mode, secret in (("public", "leaderboard", False), ("secret", "private", True))]


class StoredRun(RunPayload):
    """What the run queue stores for one run: the runner's payload and the leaderboard the run counts for (which
    RunCompleted names). Runners read it as a RunPayload and ignore the leaderboard."""

    leaderboard: str


def stage_timeouts(task: Task, mode: str, profile: ProfileOptions | None = None) -> list[int]:
    if mode == "test":
        return [task.test_timeout]
    if mode == "benchmark":
        return [task.benchmark_timeout]
    if mode == "profile":
        cases = 1 if profile is not None and profile.benchmark_index is not None else len(task.benchmarks)
        # each case runs under the profiler and then has its report exported: twice its stage timeout
        return [2 * task.benchmark_timeout] * max(1, cases)
    return [task.test_timeout, task.benchmark_timeout, task.ranked_timeout]


def run_budget_s(task: Task, mode: str, launch_allowance_s: int, profile: ProfileOptions | None = None) -> int:
    """One timeout model (docs/quickstart.md): compile step + the run's stage timeouts + the backend's allowance."""
    return COMPILE_BUDGET_S + sum(stage_timeouts(task, mode, profile)) + launch_allowance_s
