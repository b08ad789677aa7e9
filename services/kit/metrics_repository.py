"""SQL the metrics read: whether the database answers, and the depth of the durable run queue."""

from __future__ import annotations

import asyncpg

PING = "SELECT 1"
QUEUE_DEPTH = "SELECT gpu, status, count(*) AS n FROM dispatch_runs WHERE status <> 'finished' GROUP BY gpu, status"


async def ping(pool: asyncpg.Pool) -> bool:
    return await pool.fetchval(PING, timeout=2) == 1


async def queue_depth(pool: asyncpg.Pool):
    return await pool.fetch(QUEUE_DEPTH)
