"""SQL of OAuth registration: the gateway's private pending registrations, and the users they may collide with."""

from __future__ import annotations

import asyncpg

PURGE_EXPIRED = "DELETE FROM oauth_registrations WHERE expires_at < now() - interval '1 hour'"
PENDING_COUNT = "SELECT count(*) FROM oauth_registrations WHERE claimed_at IS NULL AND expires_at > now()"
PENDING_FROM = """
SELECT count(*) FROM oauth_registrations WHERE client_address = $1 AND claimed_at IS NULL AND expires_at > now()
"""
# Every client ending in /64 is an IPv6 network (services/gateway/edge/ratelimit.py client_network), so the cast
# never meets anything else; the CASE keeps it from the other rows whatever order Postgres checks the conditions in.
PENDING_IN_SITE = """
SELECT count(*) FROM oauth_registrations
WHERE claimed_at IS NULL AND expires_at > now()
  AND CASE WHEN client_address LIKE '%/64' THEN client_address::cidr <<= $1::cidr ELSE false END
"""
START = """
INSERT INTO oauth_registrations (cli_id_digest, provider, expires_at, client_address)
VALUES ($1, $2, now() + make_interval(secs => $3), $4)
"""
PENDING = """
SELECT 1 FROM oauth_registrations
WHERE cli_id_digest = $1 AND provider = $2 AND claimed_at IS NULL AND expires_at > now()
"""
# Single use: of concurrent callbacks with one state, exactly one sees the row unclaimed.
CLAIM = """
UPDATE oauth_registrations SET claimed_at = now()
WHERE cli_id_digest = $1 AND provider = $2 AND claimed_at IS NULL AND expires_at > now()
RETURNING client_address, created_at, expires_at
"""
USER = "SELECT user_id, provider FROM users WHERE user_id = $1"


async def start(pool: asyncpg.Pool, cli_id_digest: str, provider: str, ttl_s: float, client_address: str) -> None:
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(PURGE_EXPIRED)
        await conn.execute(START, cli_id_digest, provider, ttl_s, client_address)


async def pending_count(pool: asyncpg.Pool) -> int:
    return await pool.fetchval(PENDING_COUNT)


async def pending_from(pool: asyncpg.Pool, client_address: str) -> int:
    return await pool.fetchval(PENDING_FROM, client_address)


async def pending_in_site(pool: asyncpg.Pool, site: str) -> int:
    """Pending registrations of every /64 inside the IPv6 network `site`."""
    return await pool.fetchval(PENDING_IN_SITE, site)


async def pending(pool: asyncpg.Pool, cli_id_digest: str, provider: str) -> bool:
    return await pool.fetchval(PENDING, cli_id_digest, provider) is not None


async def claim(pool: asyncpg.Pool, cli_id_digest: str, provider: str):
    """The claimed registration's client address, start and expiry; None when it was not pending."""
    return await pool.fetchrow(CLAIM, cli_id_digest, provider)


async def user(pool: asyncpg.Pool, user_id: str):
    return await pool.fetchrow(USER, user_id)
