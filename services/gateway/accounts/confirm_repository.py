"""SQL of registrations waiting for their person's confirmation (a callback from another address than the start)."""

from __future__ import annotations

from datetime import datetime

import asyncpg

PURGE_EXPIRED = "DELETE FROM oauth_confirmations WHERE expires_at < now() - interval '1 hour'"
HOLD = """
INSERT INTO oauth_confirmations (token_digest, cli_id_digest, provider, user_id, user_name, is_reset, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
"""
# Single use: of a confirm and a cancel racing, exactly one finds the row unused. The state's digest must match, so
# the token alone (without the CLI id it was made for) completes nothing.
USE = """
UPDATE oauth_confirmations SET used_at = now()
WHERE token_digest = $1 AND cli_id_digest = $2 AND used_at IS NULL AND expires_at > now()
RETURNING provider, user_id, user_name, is_reset
"""


async def hold(pool: asyncpg.Pool, token_digest: str, cli_id_digest: str, provider: str, user_id: str,
               user_name: str, is_reset: bool, expires_at: datetime) -> None:
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(PURGE_EXPIRED)
        await conn.execute(HOLD, token_digest, cli_id_digest, provider, user_id, user_name, is_reset, expires_at)


async def use(pool: asyncpg.Pool, token_digest: str, cli_id_digest: str):
    """The account waiting behind the token, spent by this call; None when unknown, used or expired."""
    return await pool.fetchrow(USE, token_digest, cli_id_digest)
