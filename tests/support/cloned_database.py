"""Databases cloned from a migrated template: a copy takes milliseconds, migrating takes seconds."""

from __future__ import annotations

import asyncio
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import asyncpg

from services.kit.db import apply_migrations
from services.kit.embedded import create_database, drop_database
from services.kit.embedded.databases import database_url


@contextmanager
def migrated_template(server_url: str) -> Iterator[str]:
    """A database with every migration applied, never connected to again, so Postgres can copy it."""
    name = f"kb_template_{uuid.uuid4().hex[:12]}"
    url = create_database(server_url, name)
    apply_migrations(url)
    asyncio.run(_end_sessions(server_url, name))  # the migration tool's connection may linger until GC
    try:
        yield name
    finally:
        drop_database(server_url, name)


async def _end_sessions(server_url: str, name: str) -> None:
    conn = await asyncpg.connect(database_url(server_url, "postgres"))
    try:
        await conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                           "WHERE datname = $1 AND pid <> pg_backend_pid()", name)
    finally:
        await conn.close()


async def _clone(server_url: str, template: str, name: str) -> None:
    conn = await asyncpg.connect(database_url(server_url, "postgres"))
    try:
        await conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    finally:
        await conn.close()


@contextmanager
def cloned(server_url: str, template: str, prefix: str) -> Iterator[str]:
    """A fresh, migrated database, a copy of the template; dropped afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    asyncio.run(_clone(server_url, template, name))
    try:
        yield database_url(server_url, name)
    finally:
        try:
            drop_database(server_url, name)
        except Exception as exc:  # noqa: BLE001 - a leftover test database must not fail the test
            warnings.warn(f"could not drop test database {name}: {exc!r}", stacklevel=1)
