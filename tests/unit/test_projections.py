"""Projection logic (services/ledger/projections.py): the stage rows a RunCompleted becomes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from schemas.contracts import CompileResult, EvalResult, FullResult, ProfileResult, RunResult, SystemInfo
from schemas.events import RunCompleted
from services.ledger import projections

SYSTEM = SystemInfo(gpu="NVIDIA H100 80GB HBM3", device_count=1, cpu="AMD EPYC", torch="2.13.0")


def completed(runs: dict[str, EvalResult], *, secret: bool = False, success: bool = True) -> RunCompleted:
    return RunCompleted(
        run_id="7.H100.secret" if secret else "7.H100.public",
        submission_id=7,
        leaderboard="grayscale",
        gpu="H100",
        mode="private" if secret else "leaderboard",
        secret=secret,
        result=FullResult(success=success, system=SYSTEM, runs=runs),
    )


TEST = EvalResult(
    start="2025-03-01T12:00:00Z",
    end="2025-03-01T12:00:05.250000+00:00",
    run=RunResult(success=True, passed=True, duration=5.25, result={"check": "pass", "harness-version": "h-2"}),
)
BENCHMARK = EvalResult(
    start="2025-03-01T12:00:06+02:00",
    run=RunResult(success=True, passed=False, exit_code=112, result={"check": "fail", "harness-version": "h-2"}),
)
LEADERBOARD = EvalResult(compilation=CompileResult(success=False, exit_code=1, stderr="error: x"))


def test_one_row_per_stage_in_the_order_they_ran() -> None:
    rows = projections.stage_rows(completed({"test": TEST, "benchmark": BENCHMARK, "leaderboard": LEADERBOARD}))
    assert [row.stage for row in rows] == ["test", "benchmark", "leaderboard"]
    assert {(row.run_id, row.submission_id, row.gpu, row.secret) for row in rows} == {("7.H100.public", 7, "H100", False)}


def test_passed_needs_success_and_passed() -> None:
    crashed = EvalResult(run=RunResult(success=False, passed=True, exit_code=-11))
    rows = projections.stage_rows(completed({"test": TEST, "benchmark": BENCHMARK, "leaderboard": LEADERBOARD,
                                             "profile.0": crashed}))
    assert [row.passed for row in rows] == [True, False, False, False]


def test_stage_result_and_system_are_stored_as_json() -> None:
    row, compile_only = projections.stage_rows(completed({"test": TEST, "leaderboard": LEADERBOARD}))
    assert row.result == TEST.model_dump(mode="json")
    assert row.result["run"]["result"] == {"check": "pass", "harness-version": "h-2"}
    assert row.system == SYSTEM.model_dump(mode="json") and row.system["gpu"] == "NVIDIA H100 80GB HBM3"
    assert compile_only.result["compilation"]["stderr"] == "error: x" and compile_only.result["run"] is None


def test_harness_version_comes_from_the_stage_result() -> None:
    rows = projections.stage_rows(completed({"test": TEST, "leaderboard": LEADERBOARD}))
    assert [row.harness_version for row in rows] == ["h-2", ""]


def test_times_are_parsed_with_their_zone() -> None:
    test, benchmark, leaderboard = projections.stage_rows(
        completed({"test": TEST, "benchmark": BENCHMARK, "leaderboard": LEADERBOARD})
    )
    assert test.start_time == datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
    assert test.end_time == datetime(2025, 3, 1, 12, 0, 5, 250000, tzinfo=UTC)
    assert benchmark.start_time == datetime(2025, 3, 1, 12, 0, 6, tzinfo=timezone(timedelta(hours=2)))
    assert benchmark.start_time.utcoffset() == timedelta(hours=2)
    assert benchmark.end_time is None
    assert leaderboard.start_time is None and leaderboard.end_time is None


def test_secret_runs_are_marked() -> None:
    rows = projections.stage_rows(completed({"test": TEST}, secret=True))
    assert [(row.run_id, row.secret) for row in rows] == [("7.H100.secret", True)]


def test_profile_stage_keeps_its_name_and_profile() -> None:
    profile = EvalResult(run=RunResult(success=True, passed=True), profile=ProfileResult(profiler="ncu", trace="t"))
    (row,) = projections.stage_rows(completed({"profile.0": profile}))
    assert row.stage == "profile.0" and row.passed and row.result["profile"]["profiler"] == "ncu"


def test_no_stages_no_rows() -> None:
    assert projections.stage_rows(completed({}, success=False)) == []


def test_terminal_job_statuses() -> None:
    assert projections.TERMINAL_JOB_STATUSES == {"succeeded", "failed", "timed_out", "hacked"}
