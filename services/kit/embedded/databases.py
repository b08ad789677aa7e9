"""Creating and dropping databases on a Postgres server (tests and benchmarks use one database each)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

from services.kit.embedded.common import _run_sync

_DATABASE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def database_url(server_url: str, name: str) -> str:
    """server_url with its database swapped for name (socket/host, credentials and options kept)."""
    parts = urlsplit(_plain_postgres_scheme(server_url))
    return urlunsplit(parts._replace(path="/" + name))


def _plain_postgres_scheme(url: str) -> str:
    # SQLAlchemy-style URLs ("postgresql+psycopg2://", as testcontainers returns) mean nothing to asyncpg.
    return re.sub(r"^postgres(?:ql)?(\+[A-Za-z0-9_]+)?://", "postgresql://", url)


def _checked_name(name: str) -> str:
    if not _DATABASE_NAME.match(name):
        raise ValueError(f"invalid database name {name!r}: use letters, digits and underscores")
    return name


async def _drop_database(server_url: str, name: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(database_url(server_url, "postgres"))
    try:
        # A plain DROP fails while anyone is connected, and services reconnect between a terminate and a drop;
        # FORCE ends the sessions and drops in one statement.
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


async def _create_database(server_url: str, name: str) -> None:
    import asyncpg

    await _drop_database(server_url, name)
    conn = await asyncpg.connect(database_url(server_url, "postgres"))
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()


def create_database(server_url: str, name: str) -> str:
    """Create an empty database `name` on the server (dropping any old one first); returns its URL.

    Connects to the server's `postgres` maintenance database, whatever database server_url names.
    """
    _checked_name(name)
    _run_sync(lambda: _create_database(server_url, name))
    return database_url(server_url, name)


def drop_database(server_url: str, name: str) -> None:
    """Drop database `name` if it exists, ending its open sessions first."""
    _checked_name(name)
    _run_sync(lambda: _drop_database(server_url, name))
