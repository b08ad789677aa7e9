"""The outbox: events decided inside a consumer's transaction, published after commit with fixed ids.

A crash between commit and publish leaves the rows behind; the sweeper publishes them later, and the stream's
duplicate window drops any copy that did get through, because the message id never changes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import asyncpg
from nats.js import JetStreamContext

from schemas.envelope import Event
from schemas.streams import EVENTS
from services.kit.bus import MSG_ID_HEADER, encode

log = logging.getLogger("kernelbot.outbox")

INSERT = """
INSERT INTO outbox (message_id, subject, payload)
SELECT * FROM unnest($1::text[], $2::text[], $3::bytea[])
ON CONFLICT (message_id) DO NOTHING
"""
DELETE = "DELETE FROM outbox WHERE message_id = ANY($1::text[])"
STALE = """
SELECT message_id, subject, payload FROM outbox
WHERE created_at < now() - make_interval(secs => $1) ORDER BY id LIMIT $2
"""


Row = tuple[str, str, bytes]  # message id, subject, payload


def rows_of(events: Sequence[Event]) -> list[Row]:
    """Each event encoded once, for both the outbox row and the publish."""
    return [(e.message_id, e.subject, encode(e)) for e in events]


async def enqueue(conn: asyncpg.Connection, rows: Sequence[Row]) -> None:
    await conn.execute(INSERT, [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])


class OutboxRelay:
    def __init__(self, pool: asyncpg.Pool, js: JetStreamContext, *, sweep_every_s: float = 1.0) -> None:
        self._pool = pool
        self._js = js
        self._sweep_every_s = sweep_every_s
        self._task: asyncio.Task | None = None
        # Published rows are deleted in batches: one statement for many transactions' events.
        self._published: list[str] = []
        self._delete_soon: asyncio.Task | None = None

    async def _publish(self, rows: Sequence[Row]) -> list[str]:
        """Publish in order of creation; returns the ids the stream acknowledged."""
        sends = [
            self._js.publish(subject, payload, headers={MSG_ID_HEADER: message_id}, stream=EVENTS.name)
            for message_id, subject, payload in rows
        ]
        outcomes = await asyncio.gather(*sends, return_exceptions=True)
        done = []
        for (message_id, _, _), outcome in zip(rows, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                log.warning("outbox publish of %s failed: %s", message_id, outcome)
            else:
                done.append(message_id)
        return done

    async def publish_now(self, rows: Sequence[Row]) -> None:
        """Publish what a transaction just committed; leftovers stay for the sweeper."""
        if not rows:
            return
        self._published.extend(await self._publish(rows))
        if self._delete_soon is None or self._delete_soon.done():
            self._delete_soon = asyncio.create_task(self._delete_published(delay_s=0.05))

    async def _delete_published(self, delay_s: float = 0.0) -> None:
        await asyncio.sleep(delay_s)
        done, self._published = self._published, []
        if done:
            try:
                await self._pool.execute(DELETE, done)
            except Exception:  # noqa: BLE001 - still published; the sweeper finds them and the stream drops copies
                log.warning("could not delete %d published outbox rows", len(done))

    async def sweep_once(self, older_than_s: float = 2.0, limit: int = 500) -> int:
        await self._delete_published()
        rows = await self._pool.fetch(STALE, older_than_s, limit)
        if not rows:
            return 0
        done = await self._publish([(r["message_id"], r["subject"], bytes(r["payload"])) for r in rows])
        if done:
            await self._pool.execute(DELETE, done)
        return len(done)

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(self._sweep_every_s)
            try:
                await self.sweep_once()
            except Exception:  # noqa: BLE001 - the sweeper must outlive a database or broker hiccup
                log.exception("outbox sweep failed")

    def start(self) -> None:
        self._task = asyncio.create_task(self._sweep_forever(), name="outbox-sweeper")

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._delete_soon is not None:
            await asyncio.gather(self._delete_soon, return_exceptions=True)
        await self._delete_published()
