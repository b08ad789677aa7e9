"""Projection planning (services/ledger/projections.py): which statement rows a batch of events becomes."""

from __future__ import annotations

from datetime import UTC, datetime

from schemas.contracts import CompileResult, EvalResult, FullResult, PyConfig, RunResult, SystemInfo, Task
from schemas.events import (
    LeaderboardCreated,
    RunCompleted,
    SubmissionDeleted,
    SubmissionReceived,
)
from services.ledger import projections

SYSTEM = SystemInfo(gpu="NVIDIA H100 80GB HBM3", device_count=1, cpu="AMD EPYC", torch="2.13.0")
TASK = Task(lang="py", files={"submission.py": "@SUBMISSION@"}, config=PyConfig(main="eval.py"))
TEST = EvalResult(
    start="2025-03-01T12:00:00Z", end="2025-03-01T12:00:05.250000+00:00",
    run=RunResult(success=True, passed=True, duration=5.25, result={"check": "pass", "harness-version": "h-2"}),
)
BENCHMARK = EvalResult(run=RunResult(success=True, passed=False, exit_code=112, result={"check": "fail"}))
LEADERBOARD = EvalResult(compilation=CompileResult(success=False, exit_code=1, stderr="error: x"))


def completed(secret: bool = False) -> RunCompleted:
    return RunCompleted(
        run_id="7.H100.secret" if secret else "7.H100.public", submission_id=7, leaderboard="grayscale", gpu="H100",
        mode="private" if secret else "leaderboard", secret=secret,
        result=FullResult(success=True, system=SYSTEM, runs={"test": TEST, "benchmark": BENCHMARK,
                                                             "leaderboard": LEADERBOARD}),
    )


def received(submission_id: int) -> SubmissionReceived:
    return SubmissionReceived(submission_id=submission_id, leaderboard="grayscale", gpus=["H100"], mode="test",
                              user_id="1", user_name="a", file_name="k.py", code="x")


def test_busy_events_are_left_to_the_archive_statements_and_rare_ones_become_rows() -> None:
    deleted = SubmissionDeleted(submission_id=1, user_id="1")
    [plan] = projections.plan_batch([(1, received(1)), (2, completed()), (3, deleted)])
    assert plan.seqs == [1, 2, 3]
    assert plan.types == {"SubmissionReceived", "RunCompleted", "SubmissionDeleted"}
    assert plan.steps() == [("submission_delete", [(1,)])]  # submissions and runs are read from the archive


def test_a_board_change_is_planned_alone_between_its_neighbours() -> None:
    board = LeaderboardCreated(name="grayscale", task=TASK, gpus=["H100"], deadline=datetime.now(UTC),
                               secret_seed=3)
    plans = projections.plan_batch([(1, received(1)), (2, board), (3, received(2)), (4, received(3))])
    assert [p.seqs for p in plans] == [[1], [2], [3, 4]]
    assert [list(p.rows) for p in plans] == [[], ["leaderboard_create"], []]


def test_archive_rows_are_columns_in_batch_order() -> None:
    seqs, ids, types, subjects, correlations, _, payloads = projections.archive_rows(
        [(5, received(1)), (6, completed(secret=True))])
    assert seqs == [5, 6]
    assert ids == ["SubmissionReceived:1", "RunCompleted:7.H100.secret"]
    assert types == ["SubmissionReceived", "RunCompleted"]
    assert subjects == ["evt.submission.received", "evt.run.completed"]
    assert payloads[1]["result"]["system"]["cpu"] == "AMD EPYC"
    assert correlations == ["", ""]
