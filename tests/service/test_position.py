"""The ledger's position: announced once per batch by the ledger, and the front ends' one wait on it."""

from __future__ import annotations

import asyncio

import asyncpg

from problems import PROBLEMS_ROOT
from schemas.ledger_position import LEDGER_CONSUMER, POSITION_CHANNEL
from services.cli.bundled import leaderboards_from_competition
from services.core.infrastructure.position import LedgerPosition
from services.core.readmodel import board_reads
from services.kit.db import create_pool
from services.ledger.handlers import kit as ledger_kit
from services.ledger.handlers import router as ledger_router
from tests.support.service_tier import running_services


async def started(database_url: str) -> tuple[LedgerPosition, asyncpg.Pool]:
    pool = await create_pool(database_url, 2)
    position = LedgerPosition()
    await position.start(database_url, pool)
    return position, pool


async def test_a_wait_ends_when_the_ledger_has_applied_the_sequence(service_database):
    position, pool = await started(service_database)
    try:
        async with running_services(service_database, **{LEDGER_CONSUMER: (ledger_router, ledger_kit)}) as bus:
            await bus.publish(*leaderboards_from_competition(PROBLEMS_ROOT / "examples.yaml", set()))
            last = bus.stream.messages[-1].sequence
            assert not await position.reached(last, 0.05)  # published, not yet delivered to the ledger
            waiting = asyncio.create_task(position.reached(last, 5.0))
            await bus.settle()
            assert await waiting  # woken by the batch's announcement
            assert await board_reads.leaderboard(pool, "vectoradd_py") is not None  # and the change is readable
    finally:
        await position.stop()
        await pool.close()


async def test_a_wait_past_the_position_times_out_and_leaves_nothing_behind(service_database):
    position, pool = await started(service_database)
    try:
        assert position.applied == 0
        assert await position.reached(0, 0.01)
        assert not await position.reached(5, 0.05)
        assert position._waiting == []
    finally:
        await position.stop()
        await pool.close()


async def test_a_process_starting_late_reads_the_position_from_the_ledgers_tracking_rows(service_database):
    conn = await asyncpg.connect(service_database)
    try:
        await conn.execute("INSERT INTO tracking (consumer, stream_seq) VALUES ($1, 41), ($1, 42), ('other', 99)",
                           LEDGER_CONSUMER)
    finally:
        await conn.close()
    position, pool = await started(service_database)
    try:
        assert position.applied == 42
        assert await position.reached(42, 0.01)
    finally:
        await position.stop()
        await pool.close()


async def test_waits_are_woken_in_sequence_order_by_announcements(service_database):
    position, pool = await started(service_database)
    try:
        early, late = (asyncio.create_task(position.reached(seq, 5.0)) for seq in (3, 7))
        await asyncio.sleep(0.05)
        await pool.execute("SELECT pg_notify($1, '5')", POSITION_CHANNEL)
        assert await early
        assert not late.done()
        await pool.execute("SELECT pg_notify($1, 'not a number')", POSITION_CHANNEL)  # ignored
        await pool.execute("SELECT pg_notify($1, '9')", POSITION_CHANNEL)
        assert await late
        assert position.applied == 9
    finally:
        await position.stop()
        await pool.close()
