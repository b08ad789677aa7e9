"""The scorer's best table against the ledger's standings: the scorer's handlers through the service tier, and what
they publish projected by the ledger's own code into the same database, after every event that changes a standing
(a score, a deletion, a board's deletion, a pre-check clearing and its rescore)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg

from schemas.contracts import EvalResult, FullResult, RunResult, SystemInfo
from schemas.envelope import Event
from schemas.events import (
    LeaderboardDeleted,
    LeaderboardRankChanged,
    PlannedRun,
    RunCompleted,
    ScoreComputed,
    SubmissionAccepted,
    SubmissionDeleted,
    SubmissionReceived,
)
from schemas.operations_events import RejudgeRequested, ScoreRevised
from schemas.precheck_events import PrecheckCleared, PrecheckFinding, PrecheckVerdict
from services.kit.db import MIGRATIONS_DIR, create_pool
from services.ledger.repository import project_batch
from services.operate.replay import SCORER_TABLES, rebuild_scorer
from services.scorer.handlers import CONSUMERS, kit, router
from tests.support.platform import identity_board
from tests.support.service_tier import ServiceBus, running_service

GPU = "cpu"
NOW = datetime.now(UTC)  # the board deletions happen now; submissions are dated around it
SCORER_BEST = "SELECT leaderboard, gpu, user_id, submission_id FROM scorer_best ORDER BY 1, 2, 3"
STANDINGS = """
SELECT l.name AS leaderboard, st.gpu, st.user_id, st.submission_id
FROM standings st JOIN leaderboards l ON l.id = st.leaderboard_id ORDER BY 1, 2, 3
"""


def _stage(name: str, mean_ns: float) -> EvalResult:
    result = {"check": "pass", "harness-version": "h-1"}
    if name == "test":
        result |= {"test-count": "1", "test.0.status": "pass"}
    else:
        # two cases, so that a rescore by another rule than `mean` revises every score
        result |= {"benchmark-count": "2", "benchmark.0.spec": "n: 1", "benchmark.0.mean": str(mean_ns),
                   "benchmark.1.spec": "n: 2", "benchmark.1.mean": str(2 * mean_ns)}
    at = NOW.isoformat()
    return EvalResult(start=at, end=at, run=RunResult(success=True, passed=True, result=result))


def submission(submission_id: int, board: str, user: str, mean_ns: float, at: datetime, **accepted) -> list[Event]:
    """What the gateway, the admission and a runner publish for one ranked submission (public and secret run)."""
    tags = {"correlation_id": str(submission_id)}
    result = FullResult(success=True, system=SystemInfo(gpu=GPU),
                        runs={s: _stage(s, mean_ns) for s in ("test", "benchmark", "leaderboard")})
    runs = [PlannedRun(run_id=f"{submission_id}-pub", gpu=GPU, mode="leaderboard"),
            PlannedRun(run_id=f"{submission_id}-sec", gpu=GPU, mode="private", secret=True)]
    return [
        SubmissionReceived(submission_id=submission_id, leaderboard=board, gpus=[GPU], mode="leaderboard",
                           user_id=user, user_name=f"name-{user}", file_name="k.py", code="pass", **tags),
        SubmissionAccepted(submission_id=submission_id, leaderboard=board, user_id=user, user_name=f"name-{user}",
                           mode="leaderboard", ranking_by="mean", submitted_at=at, runs=runs, **tags, **accepted),
        *(RunCompleted(run_id=run.run_id, submission_id=submission_id, leaderboard=board, gpu=GPU, mode=run.mode,
                       secret=run.secret, ranking_by="mean", result=result, **tags) for run in runs),
    ]


class Both:
    """The scorer on the service bus; the ledger projecting everything stored on it, in stream order."""

    def __init__(self, bus: ServiceBus, conn: asyncpg.Connection) -> None:
        self.bus, self.conn, self.projected = bus, conn, 0

    async def publish(self, *events: Event) -> None:
        await self.bus.publish(*events)
        await self.bus.settle()
        fresh = [(m.sequence, m.event()) for m in self.bus.stream.messages[self.projected:]]
        async with self.conn.transaction():
            await project_batch(self.conn, fresh)
        self.projected = len(self.bus.stream.messages)

    async def best(self) -> list[tuple]:
        return [tuple(r) for r in await self.conn.fetch(SCORER_BEST)]

    async def assert_agree(self) -> list[tuple]:
        standings = [tuple(r) for r in await self.conn.fetch(STANDINGS)]
        assert await self.best() == standings
        return standings


async def dump(conn: asyncpg.Connection) -> dict[str, list[str]]:
    return {table: [r["row"] for r in await conn.fetch(f"SELECT to_jsonb(t)::text AS row FROM {table} t ORDER BY 1")]
            for table in SCORER_TABLES}


async def replayed(conn: asyncpg.Connection, bus: ServiceBus) -> dict[str, list[str]]:
    """The scorer's state rebuilt from the archive by `kernelbot events replay scorer`'s code. The service tier
    tracks what it applied under one consumer name; the replay asks each of the scorer's durable consumers."""
    for kind, consumer in CONSUMERS.items():
        await conn.execute("INSERT INTO tracking (consumer, stream_seq) SELECT $1, unnest($2::bigint[]) "
                           "ON CONFLICT DO NOTHING", consumer,
                           [m.sequence for m in bus.stream.messages if m.subject == kind.subject])
    await rebuild_scorer(conn, "archive", "", lambda _: None)
    return await dump(conn)


async def backfilled(conn: asyncpg.Connection) -> list[str]:
    """scorer_scores as the upgrade to it fills it from the archive (migration 0060, run again on an empty table)."""
    migration = (MIGRATIONS_DIR / "0060_scorer_standings.sql").read_text()
    async with conn.transaction():
        await conn.execute("TRUNCATE scorer_scores")
        await conn.execute(migration[migration.index("-- What the log says so far"):])
    return (await dump(conn))["scorer_scores"]


def rank_changes(bus: ServiceBus, after: int) -> list[LeaderboardRankChanged]:
    return [e for m in bus.stream.messages[after:] if isinstance(e := m.event(), LeaderboardRankChanged)]


async def test_the_scorers_best_is_the_standings_through_deletions_clearings_and_rescores(service_database):
    earlier = NOW - timedelta(hours=1)
    pool = await create_pool(service_database, 1)  # with the JSON codecs the ledger's statements rely on
    try:
        async with pool.acquire() as conn, running_service(router, kit, service_database) as bus:
            both = Both(bus, conn)
            await both.publish(identity_board("sb", [GPU]), identity_board("other", [GPU]))
            for sid, user, ns in ((1, "ann", 5_000), (2, "ann", 3_000), (3, "bob", 4_000), (4, "cy", 6_000),
                                  (5, "ann", 3_000)):  # ann ties her own best later: the earlier one stands
                await both.publish(*submission(sid, "sb", user, ns, earlier + timedelta(minutes=sid)))
            for sid, user, ns in ((11, "ann", 1_000), (12, "bob", 2_000)):
                await both.publish(*submission(sid, "other", user, ns, earlier + timedelta(minutes=sid)))
            assert [row[3] for row in await both.assert_agree()] == [11, 12, 2, 3, 4]

            # ann's best is deleted: her equal later score takes its place, then, that one deleted too, her next best
            mark = len(bus.stream.messages)
            await both.publish(SubmissionDeleted(submission_id=2, user_id="ann"))
            assert [row[3] for row in await both.assert_agree()] == [11, 12, 5, 3, 4]
            [change] = rank_changes(bus, mark)  # the same user and score, another submission
            assert [e.submission_id for e in change.top] == [5, 3, 4]
            mark = len(bus.stream.messages)
            await both.publish(SubmissionDeleted(submission_id=5, user_id="ann"))
            assert [row[3] for row in await both.assert_agree()] == [11, 12, 1, 3, 4]
            [change] = rank_changes(bus, mark)
            assert (change.caused_by_submission, change.causation_id) == (5, "SubmissionDeleted:5")
            assert [e.submission_id for e in change.previous_top] == [5, 3, 4]
            assert [e.submission_id for e in change.top] == [3, 1, 4]

            # the next score's rank change no longer lists the deleted submissions
            mark = len(bus.stream.messages)
            await both.publish(*submission(6, "sb", "dan", 2_000, earlier + timedelta(minutes=6)))
            [change] = rank_changes(bus, mark)
            assert [e.submission_id for e in change.top] == [6, 3, 1]
            assert not {2, 5} & {e.submission_id for e in change.top + change.previous_top}
            await both.assert_agree()

            # deleted as soon as received, before its acceptance reaches the scorer: it is judged, never stands
            received, *judged = submission(7, "sb", "bob", 500, earlier + timedelta(minutes=7))
            await both.publish(received, SubmissionDeleted(submission_id=7, user_id="bob"))
            await both.publish(*judged)
            assert [e.submission_id for e in bus.emitted(ScoreComputed)][-1] == 7
            assert 7 not in [row[3] for row in await both.assert_agree()]

            # a submission held as hacked, then cleared: reinstated, and scored by the rescore that follows
            finding = PrecheckFinding(rule="timer-patch", severity="high", message="patches the timer", line=3)
            held = PrecheckVerdict(outcome="hacked", findings=[finding], detail="marked hacked: timer-patch")
            await both.publish(*submission(8, "sb", "cy", 1_500, earlier + timedelta(minutes=8), precheck=held))
            assert 8 not in [row[3] for row in await both.assert_agree()]
            await both.publish(PrecheckCleared(submission_id=8, cleared_by="admin", reason="fine", change_id="c1"))
            assert [row[3] for row in await both.assert_agree()][2:] == [1, 3, 8, 6]
            # and deleted: cy stands with her earlier score again
            await both.publish(SubmissionDeleted(submission_id=8, user_id="cy"))
            assert [row[3] for row in await both.assert_agree()][2:] == [1, 3, 4, 6]

            # a rescore judges what stands; the deleted submissions are neither revised nor brought back
            revised_before = len(bus.emitted(ScoreRevised))
            await both.publish(RejudgeRequested(rejudge_id="r1", leaderboard="sb", action="rescore",
                                                ranking_by="geom"))
            revised = bus.emitted(ScoreRevised)[revised_before:]
            assert revised and not {2, 5, 7, 8} & {e.submission_id for e in revised}
            await both.assert_agree()

            # a board deleted: its entries leave, the other board's stay; created again, it starts empty
            mark = len(bus.stream.messages)
            await both.publish(LeaderboardDeleted(name="other", occurred_at=NOW))
            assert [row[0] for row in await both.assert_agree()] == ["sb"] * 4
            assert rank_changes(bus, mark) == []
            created = identity_board("other", [GPU])
            await both.publish(created.model_copy(update={"event_id": f"{created.event_id}:again"}))
            await both.publish(*submission(13, "other", "bob", 9_000, NOW + timedelta(seconds=1)))
            assert ("other", GPU, "bob", 13) in await both.assert_agree()

            live = await dump(conn)
            assert live["scorer_scores"] and live["scorer_deleted"] and live["scorer_board_deletions"]
            assert await backfilled(conn) == live["scorer_scores"]
            assert await replayed(conn, bus) == live
    finally:
        await pool.close()


async def test_an_acceptance_reaching_the_scorer_after_its_boards_deletion_never_stands(service_database):
    pool = await create_pool(service_database, 1)  # with the JSON codecs the ledger's statements rely on
    try:
        async with pool.acquire() as conn, running_service(router, kit, service_database) as bus:
            await bus.publish(LeaderboardDeleted(name="gone", occurred_at=NOW))
            await bus.publish(*submission(21, "Gone", "ann", 1_000, NOW - timedelta(seconds=1))[1:])
            await bus.publish(*submission(22, "gone", "bob", 1_000, NOW + timedelta(seconds=1))[1:])
            await bus.settle()
            assert sorted(e.submission_id for e in bus.emitted(ScoreComputed)) == [21, 22]
            # made after the deletion: to the board created again under the name
            assert [tuple(r) for r in await conn.fetch(SCORER_BEST)] == [("gone", GPU, "bob", 22)]
    finally:
        await pool.close()
