"""SQL of the run payloads the gateway serves to runners, each once (migrations/0050_runner_payloads.sql)."""

from __future__ import annotations

import asyncpg

# Deleting is taking: of two fetches of one link, exactly one gets the payload.
TAKE = "DELETE FROM runner_payloads WHERE token_hash = $1 RETURNING body, expires_at > now() AS fresh"


async def take_payload(pool: asyncpg.Pool, token_hash: bytes) -> str | None:
    """The payload behind a link, removed as it is read; None when unknown, already taken or expired."""
    row = await pool.fetchrow(TAKE, token_hash)
    return row["body"] if row is not None and row["fresh"] else None
