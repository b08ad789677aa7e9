"""One Postgres LISTEN connection for every channel a process follows; it survives the database restarting: it
reconnects and tells each subscriber to catch up."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

import asyncpg

log = logging.getLogger("kernelbot.listener")

RECONNECT_DELAY_S = 0.5


def _nothing() -> None:
    return None


@dataclass(frozen=True)
class Subscriber:
    on_notify: Callable[[str], None]
    on_reconnect: Callable[[], None]


class Listener:
    """Calls each subscriber's `on_notify(payload)` for every notification on its channel, over one connection.

    After a lost connection, every `on_reconnect()` runs once the listener is back, since notifications sent
    meanwhile are gone: each owner re-reads whatever it was waiting for. Subscribe before `start()`.
    """

    def __init__(self, database_url: str) -> None:
        self._url = database_url
        self._subscribers: dict[str, list[Subscriber]] = {}
        self._conn: asyncpg.Connection | None = None
        self._lost = asyncio.Event()
        self._task: asyncio.Task | None = None

    def subscribe(self, channel: str, on_notify: Callable[[str], None],
                  on_reconnect: Callable[[], None] = _nothing) -> Listener:
        if self._conn is not None:
            raise RuntimeError(f"subscribe to {channel} before the listener starts")
        self._subscribers.setdefault(channel, []).append(Subscriber(on_notify, on_reconnect))
        return self

    @property
    def channels(self) -> tuple[str, ...]:
        return tuple(self._subscribers)

    async def start(self) -> None:
        await self._connect()
        self._task = asyncio.create_task(self._keep_alive(), name=f"listen-{'+'.join(self.channels)}")

    def _dispatch(self, _conn: object, _pid: int, channel: str, payload: str) -> None:
        for subscriber in self._subscribers.get(channel, ()):
            subscriber.on_notify(payload)

    async def _connect(self) -> None:
        self._lost.clear()
        conn = await asyncpg.connect(self._url)
        conn.add_termination_listener(lambda _conn: self._lost.set())
        for channel in self._subscribers:
            await conn.add_listener(channel, self._dispatch)
        self._conn = conn

    async def _keep_alive(self) -> None:
        while True:
            await self._lost.wait()
            log.warning("lost the LISTEN connection for %s; reconnecting", ", ".join(self.channels))
            while True:
                await asyncio.sleep(RECONNECT_DELAY_S)
                try:
                    await self._connect()
                    break
                except (OSError, asyncpg.PostgresError) as exc:
                    log.warning("reconnecting LISTEN %s failed: %s", ", ".join(self.channels), exc)
            for subscribers in self._subscribers.values():
                for subscriber in subscribers:
                    subscriber.on_reconnect()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._conn is not None and not self._conn.is_closed():
            await self._conn.close()
