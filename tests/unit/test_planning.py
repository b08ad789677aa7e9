"""Run planning (services/dispatcher/planning.py): the runs a submission becomes and each run's time budget."""

from __future__ import annotations

import pytest

from runner.task.payload import build_payload
from schemas.contracts import SUBMISSION_MARKER, ProfileOptions, PyConfig, RunPayload, Task
from schemas.events import PlannedRun
from services.dispatcher import planning

ALLOWANCE = 45


def task(benchmarks: int = 2, **timeouts) -> Task:
    return Task(
        lang="py",
        files={"submission.py": SUBMISSION_MARKER, "eval.py": ""},
        config=PyConfig(main="eval.py"),
        tests=[{"seed": 1}],
        benchmarks=[{"seed": i} for i in range(benchmarks)],
        **({"test_timeout": 10, "benchmark_timeout": 200, "ranked_timeout": 3000} | timeouts),
    )


# -------------------------------------------------------------------------------------------------- runs


def test_ranked_is_a_public_and_a_secret_run_per_gpu() -> None:
    runs = planning.plan_runs(42, "leaderboard", ["H100", "T4"])
    assert all(isinstance(run, PlannedRun) for run in runs)
    assert [(r.gpu, r.mode, r.secret) for r in runs] == [
        ("H100", "leaderboard", False),
        ("H100", "private", True),
        ("T4", "leaderboard", False),
        ("T4", "private", True),
    ]


@pytest.mark.parametrize("mode", ["test", "benchmark", "profile"])
def test_other_modes_are_one_public_run_per_gpu(mode: str) -> None:
    runs = planning.plan_runs(42, mode, ["H100", "T4", "cpu"])
    assert [(r.gpu, r.mode, r.secret) for r in runs] == [("H100", mode, False), ("T4", mode, False), ("cpu", mode, False)]


@pytest.mark.parametrize("mode", ["test", "benchmark", "profile", "leaderboard"])
def test_run_ids_are_distinct_and_deterministic(mode: str) -> None:
    runs = planning.plan_runs(42, mode, ["H100", "T4"])
    ids = [r.run_id for r in runs]
    assert len(set(ids)) == len(ids)
    # A redelivered SubmissionReceived plans the very same runs: the ids are business identity, not fresh uuids.
    assert planning.plan_runs(42, mode, ["H100", "T4"]) == runs
    assert not set(ids) & {r.run_id for r in planning.plan_runs(43, mode, ["H100", "T4"])}
    assert all("42" in run_id for run_id in ids)


def test_run_ids_differ_across_modes_of_the_same_submission_id() -> None:
    every = [r.run_id for mode in ("test", "benchmark", "profile", "leaderboard")
             for r in planning.plan_runs(7, mode, ["H100"])]
    assert len(set(every)) == len(every)


def test_no_gpu_no_runs() -> None:
    assert planning.plan_runs(42, "leaderboard", []) == []


# ------------------------------------------------------------------------------------------------ budgets


@pytest.mark.parametrize(("mode", "stages"), [
    ("test", 10),
    ("benchmark", 200),
    ("leaderboard", 10 + 200 + 3000),
    ("private", 10 + 200 + 3000),
    ("profile", 2 * 2 * 200),  # one profile stage per benchmark, each twice its timeout (capture, then export)
])
def test_budget_is_compile_step_plus_stage_timeouts_plus_allowance(mode: str, stages: int) -> None:
    assert planning.COMPILE_BUDGET_S == 120
    assert planning.run_budget_s(task(), mode, ALLOWANCE) == 120 + stages + ALLOWANCE


def test_profile_without_benchmarks_still_has_one_stage() -> None:
    assert planning.run_budget_s(task(benchmarks=0), "profile", 0) == 120 + 2 * 200


def test_a_profile_of_one_chosen_case_budgets_one_stage() -> None:
    chosen = ProfileOptions(benchmark_index=1)
    assert planning.run_budget_s(task(), "profile", 0, chosen) == 120 + 2 * 200
    assert planning.run_budget_s(task(), "profile", 0, ProfileOptions(kernel_name="gemm")) == 120 + 2 * 2 * 200


def test_budget_follows_the_task_and_the_allowance() -> None:
    small = task(test_timeout=60, benchmark_timeout=60, ranked_timeout=60)
    assert planning.run_budget_s(small, "leaderboard", 0) == 120 + 180
    assert planning.run_budget_s(small, "leaderboard", 600) == 120 + 180 + 600
    assert planning.stage_timeouts(small, "leaderboard") == [60, 60, 60]


def test_both_ranked_runs_get_the_same_budget() -> None:
    runs = planning.plan_runs(1, "leaderboard", ["H100"])
    assert {planning.run_budget_s(task(), run.mode, ALLOWANCE) for run in runs} == {120 + 3210 + ALLOWANCE}


def test_a_rerun_repeats_the_ranked_runs_of_each_gpu_named_after_the_rejudge():
    assert planning.rerun_runs(7, ["H100", "A100", "H100"], "r1") == [
        PlannedRun(run_id="7.H100.public.r1", gpu="H100", mode="leaderboard"),
        PlannedRun(run_id="7.H100.secret.r1", gpu="H100", mode="private", secret=True),
        PlannedRun(run_id="7.A100.public.r1", gpu="A100", mode="leaderboard"),
        PlannedRun(run_id="7.A100.secret.r1", gpu="A100", mode="private", secret=True),
    ]


def test_a_stored_run_names_its_leaderboard_and_reads_back_as_the_runner_payload():
    from pydantic import ValidationError


    payload = build_payload(task(), "code", run_id="1.cpu.test", gpu="cpu", mode="test", secret=False, seed=1)
    stored = planning.StoredRun.model_validate(payload.model_dump() | {"leaderboard": "grayscale"})
    assert stored.leaderboard == "grayscale"
    assert RunPayload.model_validate(stored.model_dump(mode="json")) == payload  # the runner ignores the name
    with pytest.raises(ValidationError):
        planning.StoredRun.model_validate(payload.model_dump())
