"""The ledger's position as its tracking rows hold it (services/core/infrastructure/position.py waits on it)."""

from __future__ import annotations

import asyncpg

LEDGER_POSITION = "SELECT COALESCE(max(stream_seq), 0) FROM tracking WHERE consumer = $1"


async def ledger_position(pool: asyncpg.Pool, consumer: str) -> int:
    """The last stream sequence the ledger applied (it applies the stream in order)."""
    return int(await pool.fetchval(LEDGER_POSITION, consumer))
