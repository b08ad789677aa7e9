"""SQL of the payload links the dispatcher hands to runners (migrations/0050_runner_payloads.sql)."""

from __future__ import annotations

import asyncpg

STORE = """
INSERT INTO runner_payloads (token_hash, launch_key, body, expires_at)
VALUES ($1, $2, $3, now() + make_interval(secs => $4))
"""
# Links nobody fetched: a job that never started, or a launch whose job was found again under its key.
PURGE_EXPIRED = "DELETE FROM runner_payloads WHERE expires_at < now()"


async def store_payload(pool: asyncpg.Pool, token_hash: bytes, launch_key: str, body: str, ttl_s: float) -> None:
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(PURGE_EXPIRED)
        await conn.execute(STORE, token_hash, launch_key, body, float(ttl_s))
