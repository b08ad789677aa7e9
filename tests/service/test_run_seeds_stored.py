"""Per-run secret seeds through the dispatcher: what the run queue stores for each run of a board, on Postgres."""

from __future__ import annotations

import asyncio
import re

import asyncpg

from problems import PROBLEMS_ROOT
from schemas.events import LeaderboardCreated, RunRequested, SubmissionReceived
from services.cli.bundled import leaderboards_from_competition
from services.dispatcher import planning, repository
from services.dispatcher.enqueue import enqueue_runs
from services.dispatcher.handlers import kit as dispatcher_kit
from services.dispatcher.handlers import router as dispatcher_router
from services.dispatcher.seeds import run_seed
from services.kit.db import create_pool
from services.ledger.handlers import kit as ledger_kit
from services.ledger.handlers import router as ledger_router
from tests.support.service_tier import running_services

CODE = (PROBLEMS_ROOT / "examples" / "vectoradd_py" / "submission.py").read_text()


def received(submission_id: int, user: str) -> SubmissionReceived:
    return SubmissionReceived(submission_id=submission_id, leaderboard="vectoradd_py", gpus=["cpu"], mode="leaderboard",
                              user_id=user, user_name=user, file_name="submission.py", code=CODE,
                              correlation_id=str(submission_id))


async def stored_seeds(database_url: str) -> dict[str, int | None]:
    conn = await asyncpg.connect(database_url)
    try:
        rows = await conn.fetch("SELECT run_id, payload->>'seed' AS seed FROM dispatch_runs")
        return {row["run_id"]: None if row["seed"] is None else int(row["seed"]) for row in rows}
    finally:
        await conn.close()


async def test_two_secret_runs_of_one_board_get_their_own_seeds_and_never_the_boards_secret(service_database):
    async with running_services(service_database, ledger=(ledger_router, ledger_kit),
                                dispatcher=(dispatcher_router, dispatcher_kit)) as bus:
        boards = leaderboards_from_competition(PROBLEMS_ROOT / "examples.yaml", set())
        await bus.publish(*boards)
        await bus.publish(received(1, "alice"), received(2, "bob"))
        await bus.settle()
        secret = next(board for board in boards if board.name == "vectoradd_py").secret_seed

        seeds = await stored_seeds(service_database)
        assert set(seeds) == {"1.cpu.public", "1.cpu.secret", "2.cpu.public", "2.cpu.secret"}
        assert seeds["1.cpu.public"] is None and seeds["2.cpu.public"] is None  # the task's public seed: none
        assert seeds["1.cpu.secret"] != seeds["2.cpu.secret"]
        assert secret not in (seeds["1.cpu.secret"], seeds["2.cpu.secret"])
        assert all(0 < seeds[run] < 2**31 for run in ("1.cpu.secret", "2.cpu.secret"))

        # Both come from the board's one key, which the dispatcher drew for it and keeps.
        pool = await create_pool(service_database, 1)
        try:
            async with pool.acquire() as conn:
                board = await repository.board(conn, "vectoradd_py")
                [[key]] = await conn.fetch("SELECT seed_key FROM dispatch_seed_keys")
                assert await repository.seed_key(conn, board.id, bytes(32)) == key  # drawn once, never replaced
        finally:
            await pool.close()
        assert seeds["1.cpu.secret"] == run_seed(key, "1.cpu.secret")

        # Nothing the dispatcher published carries a seed, the key or the board's secret.
        published = [m.payload for m in bus.stream.messages if m.subject != LeaderboardCreated.subject]
        for needle in (str(secret), str(seeds["1.cpu.secret"]), str(seeds["2.cpu.secret"]), key.hex()):
            found = re.compile(rb"(?<![0-9a-f])" + needle.encode() + rb"(?![0-9a-f])")
            assert not any(found.search(payload) for payload in published), needle
        assert len(bus.emitted(RunRequested)) == 4


async def test_a_rerun_is_a_new_run_with_a_new_seed_and_a_relaunch_keeps_its_own(service_database):
    async with running_services(service_database, ledger=(ledger_router, ledger_kit)) as bus:
        await bus.publish(*leaderboards_from_competition(PROBLEMS_ROOT / "examples.yaml", set()))
        await bus.settle()
    pool = await create_pool(service_database, 1)
    try:
        conn = await pool.acquire()
        board = await repository.board(conn, "vectoradd_py")
        first = planning.plan_runs(5, "leaderboard", ["cpu"])
        rerun = planning.rerun_runs(5, ["cpu"], "rj-1")
        async with conn.transaction():
            await enqueue_runs(conn, board, 5, CODE, first, 60, {})
        async with conn.transaction():  # the same runs again, as a redelivered submission would ask
            await enqueue_runs(conn, board, 5, CODE, first, 60, {})
            await enqueue_runs(conn, board, 5, CODE, rerun, 60, {})
        await pool.release(conn)
    finally:
        await pool.close()
    seeds = await stored_seeds(service_database)
    assert len(seeds) == 4
    assert seeds["5.cpu.secret"] != seeds["5.cpu.secret.rj-1"]
    assert seeds["5.cpu.public"] is None and seeds["5.cpu.public.rj-1"] is None


async def waiting_on_a_lock(conn: asyncpg.Connection, pid: int) -> None:
    for _ in range(500):
        if await conn.fetchval("SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1", pid) == "Lock":
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the second dispatcher's draw never waited on the first's row")


async def test_two_dispatchers_drawing_a_boards_first_key_at_once_agree_on_one(service_database):
    async with running_services(service_database, ledger=(ledger_router, ledger_kit)) as bus:
        await bus.publish(*leaderboards_from_competition(PROBLEMS_ROOT / "examples.yaml", set()))
        await bus.settle()
    pool = await create_pool(service_database, 2)
    first, second = await pool.acquire(), await pool.acquire()
    try:
        board = await repository.board(first, "vectoradd_py")
        async with first.transaction():
            assert await repository.seed_key(first, board.id, b"A" * 32) == b"A" * 32
            # the second blocks on the first's uncommitted row until it commits, then returns the first's key
            racing = asyncio.ensure_future(repository.seed_key(second, board.id, b"B" * 32))
            await waiting_on_a_lock(first, second.get_server_pid())
            assert not racing.done()
        assert await racing == b"A" * 32
    finally:
        await pool.release(first)
        await pool.release(second)
        await pool.close()
