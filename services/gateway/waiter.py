"""Waits for the ledger to project a change of a submission (recorded, deleted), so a client reads its own write."""

from __future__ import annotations

import asyncio

from faststream.nats import NatsBroker

from schemas.envelope import Event
from services.kit.bus import publish
from services.kit.listener import Listener

CHANNEL = "kb_submission"


class ProjectionWaiter:
    def __init__(self) -> None:
        self._waiting: dict[int, asyncio.Future] = {}
        self._listener: Listener | None = None

    async def start(self, database_url: str) -> None:
        self._listener = Listener(database_url, CHANNEL, self._notified, self._release_all)
        await self._listener.start()

    def _notified(self, payload: str) -> None:
        future = self._waiting.pop(int(payload), None)
        if future is not None and not future.done():
            future.set_result(None)

    def _release_all(self) -> None:
        # notifications were lost with the connection: answer the waiting clients rather than make them time out
        for future in self._waiting.values():
            if not future.done():
                future.set_result(None)
        self._waiting.clear()

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

    async def publish_and_wait(self, broker: NatsBroker, event: Event, submission_id: int, timeout_s: float) -> bool:
        """Publish an event about a submission, then wait until the ledger has projected it (False on timeout)."""
        projected = self.expect(submission_id)
        try:
            await publish(broker, event)
        except BaseException:
            self._waiting.pop(submission_id, None)
            raise
        return await self.wait(submission_id, projected, timeout_s)

    async def stop(self) -> None:
        if self._listener is not None:
            await self._listener.stop()
