"""The scorer's side of the pre-check on a real Postgres, event by event, in the orders its separate consumers can
see them: a `hacked` submission finishes hacked without a score; a clearing reinstates and rescores it; a clearing
that overtakes the acceptance it clears still lifts the hold."""

from __future__ import annotations

from datetime import UTC, datetime

from schemas.contracts import FullResult, SystemInfo
from schemas.events import PlannedRun, RunCompleted, ScoreComputed, SubmissionAccepted, SubmissionFinished
from schemas.operations_events import RejudgeRequested, ScoreRevised
from schemas.precheck_events import PrecheckCleared, PrecheckFinding, PrecheckVerdict, SubmissionReinstated
from services.kit.db import apply_migrations, create_pool
from services.ledger.repository import project_batch
from services.scorer import handlers
from tests.operate.conftest import stage

AT = datetime(2026, 1, 1, tzinfo=UTC)
HACKED = PrecheckVerdict(outcome="hacked", detail="Submission rejected by KernelGuard pre-check (x). Matched rules: "
                         "fd-write.", findings=[PrecheckFinding(rule="fd-write", severity="high", message="x")])


def accepted(submission_id: int, precheck: PrecheckVerdict | None = HACKED) -> SubmissionAccepted:
    runs = [PlannedRun(run_id=f"{submission_id}.public", gpu="H100", mode="leaderboard"),
            PlannedRun(run_id=f"{submission_id}.secret", gpu="H100", mode="private", secret=True)]
    return SubmissionAccepted(submission_id=submission_id, leaderboard="board", user_id=f"u{submission_id}",
                              user_name="ada", mode="leaderboard", ranking_by="mean", submitted_at=AT, runs=runs,
                              precheck=precheck, correlation_id=str(submission_id))


def completed(submission_id: int, kind: str) -> RunCompleted:
    result = FullResult(success=True, system=SystemInfo(gpu="H100"),
                        runs={s: stage(s, [2_000.0]) for s in ("test", "benchmark", "leaderboard")})
    return RunCompleted(run_id=f"{submission_id}.{kind}", submission_id=submission_id, leaderboard="board",
                        gpu="H100", mode="private" if kind == "secret" else "leaderboard", secret=kind == "secret",
                        ranking_by="mean", result=result, correlation_id=str(submission_id))


async def test_hacked_then_cleared_then_rescored_and_a_clearing_that_overtakes_its_acceptance(database_url):
    apply_migrations(database_url)
    pool = await create_pool(database_url, 2)
    try:
        async with pool.acquire() as conn:
            seq = 0

            async def apply(applier, event):
                nonlocal seq
                seq += 1
                async with conn.transaction():
                    await project_batch(conn, [(seq, event)])  # the archive a rescore reads results from
                    return await applier(conn, event)

            await apply(handlers.apply_accepted, accepted(1))
            await apply(handlers.apply_run_completed, completed(1, "public"))
            emitted = await apply(handlers.apply_run_completed, completed(1, "secret"))
            assert [type(e) for e in emitted] == [SubmissionFinished]
            assert (emitted[0].status, emitted[0].error) == ("hacked", HACKED.detail)

            clear = PrecheckCleared(submission_id=1, cleared_by="admin", change_id="c1", occurred_at=AT)
            reinstated, rescore = await apply(handlers.apply_precheck_cleared, clear)
            assert isinstance(reinstated, SubmissionReinstated) and reinstated.status == "succeeded"
            assert isinstance(rescore, RejudgeRequested) and rescore.action == "rescore"
            assert await apply(handlers.apply_precheck_cleared, clear) == []  # cleared once

            revised = [e for e in await apply(handlers.apply_rejudge, rescore) if isinstance(e, ScoreRevised)]
            assert [(e.submission_id, e.previous_score, e.score) for e in revised] == [(1, None, 2e-6)]
            again = [e for e in await apply(handlers.apply_rejudge, rescore.model_copy(update={"rejudge_id": "r2"}))
                     if isinstance(e, ScoreRevised)]
            assert again == []  # ranked now: a later rescore has nothing to revise

            # the clearing of submission 2 reaches the scorer before its acceptance does
            assert await apply(handlers.apply_precheck_cleared,
                               PrecheckCleared(submission_id=2, cleared_by="admin", change_id="c2")) == []
            await apply(handlers.apply_accepted, accepted(2))
            await apply(handlers.apply_run_completed, completed(2, "public"))
            emitted = await apply(handlers.apply_run_completed, completed(2, "secret"))
            assert [type(e) for e in emitted if isinstance(e, (ScoreComputed, SubmissionFinished))] == [
                ScoreComputed, SubmissionFinished]
            assert emitted[-1].status == "succeeded"
    finally:
        await pool.close()
