"""How far the ledger has projected the event stream: the one "read your own write" wait of the front ends.

A front end publishes its event, gets the stream sequence from the stream's acknowledgement, and waits (bounded)
until the ledger's position reaches it. The ledger applies the stream in order and announces its position once per
batch, on a Postgres channel, in the batch's own transaction (so the announcement arrives only once the change can be
read). Nothing polls: a waiter is woken by the announcement that passes it.

A wait that depends on another service first (the dispatcher deciding on a submission, the scorer reinstating one)
cannot know the sequence it waits for; those watch their submission instead (gateway/submitting/waiter.py, settle.until).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools

from schemas.ledger_position import LEDGER_CONSUMER, POSITION_CHANNEL
from services.core.readmodel import position_reads
from services.kit.listener import Listener


class LedgerPosition:
    """The ledger's position as this process last heard it, and the waits for it to pass a sequence."""

    def __init__(self) -> None:
        self.applied = 0
        self._waiting: list[tuple[int, int, asyncio.Future]] = []  # (sequence, tie-breaker, future), a heap
        self._order = itertools.count()
        self._listener: Listener | None = None
        self._pool = None
        self._catching_up: set[asyncio.Task] = set()

    def subscribe(self, listener: Listener, pool) -> None:
        """Follow the ledger's announcements on a listener the caller starts; `catch_up()` once it has started, so
        nothing announced in between is missed."""
        self._pool = pool
        listener.subscribe(POSITION_CHANNEL, self._announced, self._catch_up_soon)

    async def start(self, database_url: str, pool) -> None:
        """Follow the ledger on a LISTEN connection of this position's own (a process that follows nothing else)."""
        self._listener = Listener(database_url)
        self.subscribe(self._listener, pool)
        await self._listener.start()
        await self.catch_up()  # after LISTEN, so nothing announced in between is missed

    async def stop(self) -> None:
        if self._listener is not None:  # only the connection it opened itself
            await self._listener.stop()
        for task in list(self._catching_up):
            task.cancel()
        for _, _, future in self._waiting:
            future.cancel()
        self._waiting.clear()

    async def catch_up(self) -> None:
        """Read the position from the ledger's tracking rows (at start, and after announcements may have been lost)."""
        assert self._pool is not None
        self._advance(await position_reads.ledger_position(self._pool, LEDGER_CONSUMER))

    def _catch_up_soon(self) -> None:
        task = asyncio.get_running_loop().create_task(self.catch_up())
        self._catching_up.add(task)
        task.add_done_callback(self._catching_up.discard)

    def _announced(self, payload: str) -> None:
        try:
            self._advance(int(payload))
        except ValueError:
            return  # not ours: nothing to learn from it

    def _advance(self, sequence: int) -> None:
        self.applied = max(self.applied, sequence)
        while self._waiting and self._waiting[0][0] <= self.applied:
            _, _, future = heapq.heappop(self._waiting)
            if not future.done():
                future.set_result(True)

    async def reached(self, sequence: int, timeout_s: float) -> bool:
        """True once the ledger has applied `sequence`; False when `timeout_s` passes first."""
        if sequence <= self.applied:
            return True
        future = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (sequence, next(self._order), future))
        try:
            return await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            return False
        finally:  # a timed-out or cancelled wait leaves no entry behind
            self._waiting = [entry for entry in self._waiting if entry[2] is not future]
            heapq.heapify(self._waiting)
