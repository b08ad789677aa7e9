"""Projection planning (services/ledger/projections.py): which statement rows a batch of events becomes."""

from __future__ import annotations

from datetime import UTC, datetime

from schemas.contracts import CompileResult, EvalResult, FullResult, PyConfig, RunResult, SystemInfo, Task
from schemas.events import (
    LeaderboardCreated,
    RunCompleted,
    RunStarted,
    SubmissionAccepted,
    SubmissionFinished,
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


def test_a_run_becomes_one_stage_row_per_stage_in_the_order_they_ran() -> None:
    run = completed()
    [plan] = projections.plan_batch([(40, run)])
    rows = plan.rows["stage_insert"]
    assert [row[1] for row in rows] == ["test", "benchmark", "leaderboard"]
    test, benchmark, leaderboard = rows
    assert test[5] is True and benchmark[5] is False and leaderboard[5] is False  # passed
    assert test[8] == "h-2" and leaderboard[8] == ""  # harness version; none without a run
    assert test[9] == datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
    assert all(row[11] == 40 for row in rows)  # the stream sequence orders runs in views
    assert leaderboard[6]["compilation"]["stderr"] == "error: x"
    assert plan.rows["run_request_status"] == [("7.H100.public", "completed", None, None, None, run.occurred_at,
                                                 7, "H100")]


def test_the_harness_version_is_the_runners_account_when_it_has_one() -> None:
    """Under an unprotected harness the result channel may be the submission's: the runner's `harness` wins."""
    forged = TEST.model_copy(update={"harness": {"kind": "problem", "version": "problem eval.py sha256:abc",
                                                 "protected": "false"}})
    run = completed().model_copy(update={"result": FullResult(success=True, system=SYSTEM, runs={"test": forged})})
    [plan] = projections.plan_batch([(41, run)])
    assert plan.rows["stage_insert"][0][8] == "problem eval.py sha256:abc"


def test_statements_run_in_lifecycle_order_whatever_the_batch_order() -> None:
    accepted = SubmissionAccepted(submission_id=1, leaderboard="grayscale", user_id="1", user_name="a",
                                  mode="test", ranking_by="last", submitted_at=datetime.now(UTC), runs=[])
    finished = SubmissionFinished(submission_id=1, status="succeeded")
    started = RunStarted(run_id="1.H100.test", submission_id=1, gpu="H100")
    [plan] = projections.plan_batch([(1, finished), (2, started), (3, accepted), (4, received(1))])
    names = [name for name, _ in plan.steps()]
    assert names.index("submission_insert") < names.index("job_set") < names.index("job_running")
    assert [row[1] for row in plan.rows["job_set"]] == ["succeeded", "pending", "initial"]


def test_a_board_change_is_planned_alone_between_its_neighbours() -> None:
    board = LeaderboardCreated(name="grayscale", task=TASK, gpus=["H100"], deadline=datetime.now(UTC),
                               secret_seed=3)
    plans = projections.plan_batch([(1, received(1)), (2, board), (3, received(2))])
    assert [list(p.rows) for p in plans] == [
        ["submission_insert", "job_set", "notify_submission"],
        ["leaderboard_create"],
        ["submission_insert", "job_set", "notify_submission"],
    ]


def test_archive_rows_are_columns_in_batch_order() -> None:
    seqs, ids, types, subjects, correlations, _, payloads = projections.archive_rows(
        [(5, received(1)), (6, completed(secret=True))])
    assert seqs == [5, 6]
    assert ids == ["SubmissionReceived:1", "RunCompleted:7.H100.secret"]
    assert types == ["SubmissionReceived", "RunCompleted"]
    assert subjects == ["evt.submission.received", "evt.run.completed"]
    assert payloads[1]["result"]["system"]["cpu"] == "AMD EPYC"
    assert correlations == ["", ""]


def test_a_precheck_verdict_a_clearing_and_a_reinstatement_are_projected_after_the_job_status() -> None:
    from schemas.events import SubmissionRejected
    from schemas.precheck_events import (
        PrecheckCleared,
        PrecheckFinding,
        PrecheckPolicySet,
        PrecheckVerdict,
        SubmissionReinstated,
    )

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
    assert plan.rows["precheck_verdict_insert"] == [
        (7, "hacked", ["timer-patch"], [finding.model_dump(mode="json")], hacked.detail, at),
        (8, "refuse", ["timer-patch"], [finding.model_dump(mode="json")], hacked.detail, at)]
    assert plan.rows["precheck_clear"] == [(7, "admin", at, "fine")]
    assert plan.rows["submission_reinstate"] == [(7, "succeeded", None)]
    assert plan.rows["precheck_policy_put"] == [("grayscale", {"thread": "off"})]
    order = [name for name, _ in plan.steps()]
    assert order.index("submission_status") < order.index("submission_reinstate")  # hacked, then reinstated
