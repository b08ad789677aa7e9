"""The pool hands connections out in the order they were asked for (services/kit/fair_pool.py), on a real Postgres.

The race is made deterministic: the pool's release hook (`reset`, awaited just before the connection goes back to
asyncio's queue) starts a newcomer, so the newcomer runs after the connection is back but before the waiter that its
return woke. asyncpg's own pool lets the newcomer take it; ours makes it wait its turn.
"""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from services.kit.fair_pool import fair_pool


async def grant_order(pool_factory) -> list[str]:
    granted: list[str] = []
    newcomers: list[asyncio.Task] = []

    async def use(name: str) -> None:
        async with pool.acquire() as conn:
            granted.append(name)
            await conn.fetchval("SELECT 1")

    async def release_hook(_conn) -> None:
        if not newcomers:
            newcomers.append(asyncio.create_task(use("newcomer")))

    pool = await pool_factory(release_hook)
    try:
        first = await pool.acquire()
        waiter = asyncio.create_task(use("waiter"))
        await asyncio.sleep(0.1)  # the waiter is queued behind the held connection
        await pool.release(first)
        await asyncio.wait_for(asyncio.gather(waiter, *newcomers), 10)
    finally:
        await pool.close()
    return granted


async def test_a_waiter_gets_the_released_connection_before_a_newcomer(database_url):
    order = await grant_order(lambda hook: fair_pool(database_url, min_size=1, max_size=1, reset=hook))
    assert order == ["waiter", "newcomer"]


async def test_the_race_is_real_with_asyncpgs_own_pool(database_url):
    """Control: the same sequence on asyncpg's pool lets the newcomer in first, so the test above can fail."""
    order = await grant_order(lambda hook: asyncpg.create_pool(database_url, min_size=1, max_size=1, reset=hook))
    assert order == ["newcomer", "waiter"]


async def test_many_waiters_are_served_first_come_first_served(database_url):
    pool = await fair_pool(database_url, min_size=1, max_size=2)
    granted: list[int] = []
    try:
        held = [await pool.acquire(), await pool.acquire()]

        async def use(n: int) -> None:
            async with pool.acquire():
                granted.append(n)
                await asyncio.sleep(0)

        tasks = []
        for n in range(20):
            tasks.append(asyncio.create_task(use(n)))
            await asyncio.sleep(0)  # each asks in turn
        for conn in held:
            await pool.release(conn)
        await asyncio.wait_for(asyncio.gather(*tasks), 10)
        assert granted == list(range(20))
    finally:
        await pool.close()


async def test_a_timed_out_or_double_release_leaves_every_turn_usable(database_url):
    pool = await fair_pool(database_url, min_size=1, max_size=1)
    try:
        conn = await pool.acquire()
        with pytest.raises(asyncio.TimeoutError):
            await pool.acquire(timeout=0.05)  # gave up waiting: holds no turn
        await pool.release(conn)
        await pool.release(conn)  # a second release of the same connection gives nothing back twice
        async with pool.acquire(timeout=1) as again:
            assert await again.fetchval("SELECT 2") == 2
            with pytest.raises(asyncio.TimeoutError):
                await pool.acquire(timeout=0.05)  # still one connection, one turn
    finally:
        await pool.close()
