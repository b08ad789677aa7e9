"""What `kernelbot users` reads of the read model: who holds a CLI id (or a web id), by user id or by digest."""

from __future__ import annotations

import asyncpg

BY_ID = "SELECT user_id, user_name FROM users WHERE user_id = ANY($1::text[]) ORDER BY user_id"
BY_CLI_DIGEST = """
SELECT user_id, user_name FROM users WHERE cli_id_sha256 = ANY($1::text[]) ORDER BY user_id
"""
BY_WEB_DIGEST = "SELECT user_id FROM users WHERE web_auth_id_sha256 = ANY($1::text[]) ORDER BY user_id"
HOLDING = "SELECT count(*) FROM users WHERE (user_id, cli_id_sha256) IN (SELECT * FROM unnest($1::text[], $2::text[]))"


async def by_id(conn: asyncpg.Connection, user_ids: list[str]) -> list[asyncpg.Record]:
    return await conn.fetch(BY_ID, user_ids)


async def by_cli_digest(conn: asyncpg.Connection, digests: list[str]) -> list[asyncpg.Record]:
    return await conn.fetch(BY_CLI_DIGEST, digests)


async def by_web_digest(conn: asyncpg.Connection, digests: list[str]) -> list[asyncpg.Record]:
    return await conn.fetch(BY_WEB_DIGEST, digests)


async def holding(conn: asyncpg.Connection, user_ids: list[str], digests: list[str]) -> int:
    """How many of the users already hold the digest paired with them."""
    return await conn.fetchval(HOLDING, user_ids, digests)
