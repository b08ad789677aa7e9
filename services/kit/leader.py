"""One active replica among several: a Postgres session lock held for the life of the process.

The ledger applies the log in stream order, which two replicas pulling batches at once could not keep; so replicas
of it wait at start-up until the active one is gone, then take over where its durable consumer stands.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import zlib

import asyncpg

from services.kit.ride_out import through_outage

log = logging.getLogger("kernelbot.leader")

LOCK = "SELECT pg_advisory_lock(8240, $1)"
TRY_LOCK = "SELECT pg_try_advisory_lock(8240, $1)"
RETAKE_EVERY_S = 0.5


class LeaderLock:
    def __init__(self, database_url: str, name: str) -> None:
        self._url = database_url
        self._key = zlib.crc32(name.encode()) & 0x7FFFFFFF
        self._name = name
        self._conn: asyncpg.Connection | None = None
        self._releasing = False
        self._retake: asyncio.Task | None = None

    async def acquire(self) -> None:
        """Wait until no other replica holds the lock, then hold it."""
        conn = await asyncpg.connect(self._url)
        await conn.execute(LOCK, self._key)
        conn.add_termination_listener(self._lost)
        self._conn = conn
        log.warning("active replica for %s", self._name)

    def _lost(self, _conn) -> None:
        if self._releasing:
            return
        log.warning("lost the %s lock (database connection ended); taking it again", self._name)
        self._retake = asyncio.get_running_loop().create_task(self._take_again())

    async def _take_again(self) -> None:
        """After the database comes back: hold the lock again, or stop if a standby was quicker.

        A standby took over only if it holds the lock now; then this replica must stop consuming at once, and a
        supervisor starts it again as a standby.
        """
        while not self._releasing:
            await asyncio.sleep(RETAKE_EVERY_S)
            try:
                conn = await asyncpg.connect(self._url)
            except (OSError, asyncpg.PostgresError):
                continue  # still down: nothing can be applied meanwhile either
            if await conn.fetchval(TRY_LOCK, self._key):
                conn.add_termination_listener(self._lost)
                self._conn = conn
                log.warning("active replica for %s again", self._name)
                return
            await conn.close()
            log.error("another replica took over %s; stopping", self._name)
            os.kill(os.getpid(), signal.SIGTERM)
            return

    async def release(self) -> None:
        self._releasing = True
        if self._retake is not None:
            self._retake.cancel()
        if self._conn is not None and not self._conn.is_closed():
            await self._conn.close()


async def await_redeliveries(js, stream: str, durable: str, timeout_s: float) -> None:
    """Wait until nothing is held by a replica that died: then its messages are redelivered before any later one.

    Found by bench/chaos.py: a ledger killed with part of a batch in hand, and its successor consuming later events
    first (a submission's status applied before the submission). JetStream serves redeliveries before new messages,
    so starting only once nothing is awaiting acknowledgement keeps stream order across a crash.
    """
    from nats.js.errors import NotFoundError

    deadline = asyncio.get_running_loop().time() + timeout_s
    while asyncio.get_running_loop().time() < deadline:
        try:
            info = await through_outage(lambda: js.consumer_info(stream, durable), f"reading {durable}")
        except NotFoundError:
            return  # a first start: nothing was ever delivered
        if not info.num_ack_pending:
            return
        await asyncio.sleep(0.5)
    log.warning("%s still has %s messages awaiting acknowledgement; starting anyway", durable, info.num_ack_pending)
