"""A Postgres LISTEN that survives the database restarting: it reconnects and tells its owner to catch up."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import asyncpg

log = logging.getLogger("kernelbot.listener")

RECONNECT_DELAY_S = 0.5


class Listener:
    """Calls `on_notify(payload)` for every notification on `channel`.

    After a lost connection, `on_reconnect()` runs once the listener is back, since notifications sent meanwhile
    are gone: the owner re-reads whatever it was waiting for.
    """

    def __init__(self, database_url: str, channel: str, on_notify: Callable[[str], None],
                 on_reconnect: Callable[[], None] = lambda: None) -> None:
        self._url = database_url
        self._channel = channel
        self._on_notify = on_notify
        self._on_reconnect = on_reconnect
        self._conn: asyncpg.Connection | None = None
        self._lost = asyncio.Event()
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        await self._connect()
        self._task = asyncio.create_task(self._keep_alive(), name=f"listen-{self._channel}")

    async def _connect(self) -> None:
        self._lost.clear()
        conn = await asyncpg.connect(self._url)
        conn.add_termination_listener(lambda _conn: self._lost.set())
        await conn.add_listener(self._channel, lambda _c, _pid, _ch, payload: self._on_notify(payload))
        self._conn = conn

    async def _keep_alive(self) -> None:
        while True:
            await self._lost.wait()
            log.warning("lost the LISTEN connection for %s; reconnecting", self._channel)
            while True:
                await asyncio.sleep(RECONNECT_DELAY_S)
                try:
                    await self._connect()
                    break
                except (OSError, asyncpg.PostgresError) as exc:
                    log.warning("reconnecting LISTEN %s failed: %s", self._channel, exc)
            self._on_reconnect()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._conn is not None and not self._conn.is_closed():
            await self._conn.close()
