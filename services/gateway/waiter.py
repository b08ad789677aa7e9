"""Waits for the ledger to make a new submission readable, so a client may poll it as soon as it has its id."""

from __future__ import annotations

import asyncio

import asyncpg

CHANNEL = "kb_submission"


class ProjectionWaiter:
    def __init__(self) -> None:
        self._waiting: dict[int, asyncio.Future] = {}
        self._conn: asyncpg.Connection | None = None

    async def start(self, database_url: str) -> None:
        self._conn = await asyncpg.connect(database_url)
        await self._conn.add_listener(CHANNEL, self._notified)

    def _notified(self, _conn, _pid, _channel, payload: str) -> None:
        future = self._waiting.pop(int(payload), None)
        if future is not None and not future.done():
            future.set_result(None)

    def expect(self, submission_id: int) -> asyncio.Future:
        future = asyncio.get_running_loop().create_future()
        self._waiting[submission_id] = future
        return future

    async def wait(self, submission_id: int, future: asyncio.Future, timeout_s: float) -> bool:
        try:
            await asyncio.wait_for(future, timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            self._waiting.pop(submission_id, None)

    async def stop(self) -> None:
        if self._conn is not None:
            await self._conn.close()
