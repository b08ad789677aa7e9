"""Postgres access: the pool, and migrations applied at start-up."""

from __future__ import annotations

import json
from pathlib import Path

import asyncpg

from services.kit.fair_pool import fair_pool

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"


async def _init_connection(conn: asyncpg.Connection) -> None:
    for kind in ("json", "jsonb"):
        await conn.set_type_codec(kind, encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


async def _keep_session(_conn: asyncpg.Connection) -> None:
    """Release without the reset query: the pool still rolls back an open transaction and drops listeners."""


async def create_pool(url: str, size: int = 8, *, reset_sessions: bool = True) -> asyncpg.Pool:
    """A pool that serves its waiters in arrival order (fair_pool.py). `reset_sessions=False` for a reader that never
    changes session state (no SET, LISTEN or advisory lock on a pooled connection): it saves a round trip on every
    release."""
    return await fair_pool(url, min_size=1, max_size=size, init=_init_connection,
                           reset=None if reset_sessions else _keep_session)


def _yoyo_url(url: str) -> str:
    scheme, rest = url.split("://", 1)
    return f"postgresql+psycopg://{rest}" if scheme in ("postgresql", "postgres") else url


def apply_migrations(url: str) -> int:
    """Apply every pending forward-only migration; returns how many were applied."""
    from yoyo import get_backend, read_migrations

    backend = get_backend(_yoyo_url(url))
    migrations = read_migrations(str(MIGRATIONS_DIR))
    with backend.lock():
        pending = backend.to_apply(migrations)
        backend.apply_migrations(pending)
    return len(pending)
