"""Postgres access: the pool, and migrations applied at start-up."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import asyncpg
import psycopg

from services.kit.fair_pool import fair_pool

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"
FIRST_DELAY_S, MAX_DELAY_S = 0.1, 5.0

log = logging.getLogger("kernelbot.db")


async def _init_connection(conn: asyncpg.Connection) -> None:
    for kind in ("json", "jsonb"):
        await conn.set_type_codec(kind, encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


async def _keep_session(_conn: asyncpg.Connection) -> None:
    """Release without the reset query: the pool still rolls back an open transaction and drops listeners."""


async def create_pool(url: str, size: int = 8, *, reset_sessions: bool = True) -> asyncpg.Pool:
    """A pool that serves its waiters in arrival order (fair_pool.py). `reset_sessions=False` for a process that never
    changes session state on a pooled connection (no SET but SET LOCAL, no LISTEN, no session advisory lock; the
    house rules check the services' SQL for them): it saves a round trip on every release, one per transaction of a
    consumer."""
    return await fair_pool(url, min_size=1, max_size=size, init=_init_connection,
                           reset=None if reset_sessions else _keep_session)


def _yoyo_url(url: str) -> str:
    scheme, rest = url.split("://", 1)
    return f"postgresql+psycopg://{rest}" if scheme in ("postgresql", "postgres") else url


# One migrator at a time, by a Postgres session lock: the server releases it when its holder's connection ends, so a
# process that died mid-migration (or lost its database to a restart) never leaves it behind, and a waiter waits as
# long as the migrations take. yoyo's own lock is a table row that outlives a crashed holder and gives up after 10 s:
# services starting together on a loaded host died of its LockTimeout, and a stale row would stop every later start.
MIGRATION_LOCK = "SELECT pg_advisory_lock(8260, 0)"
MIGRATION_UNLOCK = "SELECT pg_advisory_unlock(8260, 0)"


def apply_migrations(url: str, wait_s: float | None = None) -> int:
    """Apply every pending forward-only migration; returns how many were applied. A database that is away (not up
    yet, restarting) is waited for, as NATS is (ride_out.py): each migration is applied and recorded in one
    transaction, so trying again after an outage applies what is left. A service waits as long as it takes
    (`wait_s` None); a command a person runs says at once (0) or after `wait_s` that the database is away."""
    delay_s, started = FIRST_DELAY_S, time.monotonic()
    while True:
        try:
            return _apply_migrations_once(url)
        except psycopg.OperationalError as exc:
            if not database_away(exc) or (wait_s is not None and time.monotonic() - started + delay_s > wait_s):
                raise
            log.warning("applying migrations: the database is away (%s); trying again in %.1f s", exc, delay_s)
            time.sleep(delay_s)
            delay_s = min(delay_s * 2, MAX_DELAY_S)


def database_away(exc: psycopg.OperationalError) -> bool:
    """No answer (no SQLSTATE), a connection lost (class 08) or the server stopping or starting (class 57); a refusal
    (bad credentials, no such database) would not heal by waiting."""
    return exc.sqlstate is None or exc.sqlstate.startswith(("08", "57"))


def _apply_migrations_once(url: str) -> int:
    from yoyo import get_backend, read_migrations  # here: yoyo is heavy, and only start-up applies migrations

    backend = get_backend(_yoyo_url(url))
    migrations = read_migrations(str(MIGRATIONS_DIR))
    try:
        with backend.transaction():
            backend.execute(MIGRATION_LOCK)
        # Holding the session lock, a row in yoyo's lock table was left by a migrator that died holding it.
        backend.break_lock()
        with backend.lock():
            pending = backend.to_apply(migrations)
            backend.apply_migrations(pending)
        with backend.transaction():
            backend.execute(MIGRATION_UNLOCK)
    finally:
        backend.connection.close()  # ends the session, and the session lock with it, whatever happened
    return len(pending)
