"""Board ids as the ledger gives them: the id a LeaderboardCreated names (an import keeps upstream's), a practice
board's from its own range, every other board's from the sequence, which moves past each named id; a rebuild of the
read model gives every board the id it had."""

from __future__ import annotations

from datetime import UTC, datetime

import asyncpg

from problems import PROBLEMS_ROOT
from runner.task.taskfile import load_problem
from schemas.events import FIRST_PRACTICE_BOARD_ID
from services.cli.bundled import leaderboards_from_competition
from services.core.admin.dev_boards import dev_board_events, dev_board_name
from services.kit.db import create_pool
from services.ledger.handlers import kit as ledger_kit
from services.ledger.handlers import router as ledger_router
from services.operate.db import connection
from services.operate.replay import rebuild_ledger
from tests.support.platform import identity_board
from tests.support.service_tier import running_service

BOARDS = "SELECT id, name, practice FROM leaderboards ORDER BY id"


async def rows(database_url: str) -> list[tuple]:
    conn = await asyncpg.connect(database_url)
    try:
        return [tuple(r) for r in await conn.fetch(BOARDS)]
    finally:
        await conn.close()


def kept(name: str, board_id: int):
    return identity_board(name, ["null"]).model_copy(update={"board_id": board_id, "event_id": f"kept:{name}"})


async def test_boards_take_named_practice_or_sequence_ids_and_a_rebuild_gives_each_the_same(service_database):
    bundled = leaderboards_from_competition(PROBLEMS_ROOT / "examples.yaml", set())
    pool = await create_pool(service_database, 1)
    try:
        async with running_service(ledger_router, ledger_kit, service_database) as bus:
            await bus.publish(*bundled, identity_board("own", ["null"]))
            await bus.settle()
            problem = load_problem(PROBLEMS_ROOT / "examples" / "identity_py")
            dev, _ = await dev_board_events(pool, dev_board_name("identity_py"), problem, gpus=["null"],
                                            now=datetime.now(UTC))
            await bus.publish(*dev, kept("imported", 5), identity_board("later", ["null"]),
                              kept("clashing", 1), identity_board("after", ["null"]))
            await bus.settle()
            live = await rows(service_database)

            by_name = {name: (board_id, practice) for board_id, name, practice in live}
            practice = [board_id for board_id, _, is_practice in live if is_practice]
            assert practice == list(range(FIRST_PRACTICE_BOARD_ID, FIRST_PRACTICE_BOARD_ID + len(bundled) + 1))
            assert {b.name for b in bundled} | {"identity_py-dev"} == {n for n, (_, p) in by_name.items() if p}
            assert by_name["own"] == (1, False) and by_name["imported"] == (5, False)
            assert by_name["later"] == (6, False)  # the sequence moved past the named id
            assert "clashing" not in by_name and by_name["after"] == (7, False)  # a taken id: no board, no stop

            async with connection(service_database) as conn:  # with the services' JSON codecs
                await rebuild_ledger(conn, "archive", "", lambda _: None)
            assert await rows(service_database) == live

            await bus.publish(identity_board("after-rebuild", ["null"]),
                              identity_board("practice-after-rebuild", ["null"]).model_copy(update={"practice": True}))
            await bus.settle()
    finally:
        await pool.close()
    after = {name: board_id for board_id, name, _ in await rows(service_database)}
    # the rebuild left both sequences where they were
    assert after["after-rebuild"] == 8 and after["practice-after-rebuild"] == practice[-1] + 1
