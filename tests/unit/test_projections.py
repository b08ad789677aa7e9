"""Projection planning (services/ledger/projections.py): which statement rows a batch of events becomes."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from schemas.contracts import CompileResult, EvalResult, FullResult, PyConfig, RunResult, SystemInfo, Task
from schemas.events import (
    LeaderboardCreated,
    RunCompleted,
    SubmissionAccepted,
    SubmissionDeleted,
    SubmissionFinished,
    SubmissionReceived,
    SubmissionRejected,
    UserRenamed,
)
from schemas.precheck_events import (
    PrecheckCleared,
    PrecheckFinding,
    PrecheckPolicySet,
    PrecheckVerdict,
    SubmissionReinstated,
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
    assert json.loads(payloads[1])["result"]["system"]["cpu"] == "AMD EPYC"
    assert correlations == ["", ""]


def test_a_precheck_verdict_a_clearing_and_a_reinstatement_are_projected_after_the_job_status() -> None:

    at = datetime(2026, 1, 1, tzinfo=UTC)
    finding = PrecheckFinding(rule="timer-patch", severity="high", message="reassigns a timer", line=3)
    hacked = PrecheckVerdict(outcome="hacked", findings=[finding], detail="Submission rejected ... timer-patch.")
    accepted = SubmissionAccepted(submission_id=7, leaderboard="grayscale", user_id="1", user_name="a",
                                  mode="leaderboard", ranking_by="last", submitted_at=at, runs=[], precheck=hacked,
                                  occurred_at=at)
    refused = SubmissionRejected(submission_id=8, reason="x", precheck=hacked.model_copy(update={"outcome": "refuse"}),
                                 occurred_at=at)
    plain = SubmissionAccepted(submission_id=9, leaderboard="grayscale", user_id="1", user_name="a", mode="test",
                               ranking_by="last", submitted_at=at, runs=[])
    events = [accepted, refused, plain, SubmissionFinished(submission_id=7, status="hacked", error="x"),
              PrecheckCleared(submission_id=7, cleared_by="admin", reason="fine", change_id="c", occurred_at=at),
              SubmissionReinstated(submission_id=7, status="succeeded", rejudge_id="r"),
              PrecheckPolicySet(leaderboard="grayscale", outcomes={"thread": "off"}, change_id="c")]
    [plan] = projections.plan_batch(list(enumerate(events, start=1)))
    # verdicts ride on the busy admission events: the archive statement reads them (tests/operate/test_standings.py)
    assert "precheck_verdict_insert" not in plan.rows
    assert {"SubmissionAccepted", "SubmissionRejected"} <= plan.types
    assert plan.rows["precheck_clear"] == [(7, "admin", at, "fine")]
    assert plan.rows["submission_reinstate"] == [(7, "succeeded", None)]
    assert plan.rows["precheck_policy_put"] == [("grayscale", {"thread": "off"})]
    order = projections.STATEMENT_ORDER
    assert order.index("submission_status") < order.index("precheck_verdict_insert") < order.index("precheck_clear")
    # hacked, then reinstated, then the standings rank the reinstated submission's scores
    assert order.index("submission_status") < order.index("submission_reinstate") < order.index("standing_refresh")


def test_a_rename_reaches_the_user_their_submissions_and_their_standings() -> None:
    renamed = UserRenamed(user_id="1", user_name="ann", change_id="c")
    [plan] = projections.plan_batch([(5, received(1)), (6, renamed)])
    assert plan.rows["user_rename"] == [("1", "ann")]
    assert plan.rows["user_rename_submissions"] == [("1", "ann")]
    assert plan.rows["standing_rename"] == [("1", "ann", 6)]  # the board's version moves to the rename
    order = projections.STATEMENT_ORDER
    assert order.index("user_rename_submissions") < order.index("standing_refresh") < order.index("standing_rename")
