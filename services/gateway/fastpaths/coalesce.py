"""Reads of the same key that arrive together share one database round trip, and none is ever answered by a read
that began before it arrived.

Near a deadline dozens of requests for the same ranking arrive within one turn of the event loop; each needs the
board's current standings version (a request must never be served from before a change it could already see). A
request joins the read of its key that is scheduled but not yet sent; once sent, later requests schedule the next one.
So every request's answer comes from a read that started after the request did: as fresh as a read of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Any


class Coalesced:
    def __init__(self, read: Callable[..., Awaitable[Any]]) -> None:
        self._read = read
        self._unsent: dict[Hashable, asyncio.Future] = {}

    async def get(self, *key: Hashable) -> Any:
        future = self._unsent.get(key)
        if future is None:
            future = asyncio.get_running_loop().create_future()
            self._unsent[key] = future
            asyncio.get_running_loop().create_task(self._run(key, future))
        return await asyncio.shield(future)

    async def _run(self, key: tuple, future: asyncio.Future) -> None:
        del self._unsent[key]  # sent now: whoever arrives from here on waits for a read of their own
        try:
            future.set_result(await self._read(*key))
        except BaseException as exc:  # noqa: BLE001 - every joiner gets the failure, as its own read would
            future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
