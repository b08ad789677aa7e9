"""What the operator commands `kernelbot runners` and `verify-runs` read of the dispatcher's tables."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg

# Every GPU a dispatcher announced, and every GPU with unfinished runs (one nobody serves shows as such).
GPUS = """
WITH counts AS (
    SELECT gpu, count(*) FILTER (WHERE status = 'queued') AS queued,
           count(*) FILTER (WHERE status = 'launched') AS running
    FROM dispatch_runs WHERE status <> 'finished' GROUP BY gpu)
SELECT coalesce(g.gpu, c.gpu) AS gpu, g.backend, coalesce(g.target, '') AS target, g.arch, g.slots,
       coalesce(c.queued, 0) AS queued, coalesce(c.running, 0) AS running
FROM dispatch_gpus g FULL JOIN counts c ON c.gpu = g.gpu
ORDER BY 1
"""
RUNNING = """
SELECT run_id, gpu, backend, job_ref, attempts, launched_at, lease_owner FROM dispatch_runs
WHERE status = 'launched' ORDER BY gpu, launched_at
"""
BOARD_GPUS = "SELECT gpus FROM leaderboards WHERE lower(name) = lower($1)"


@dataclass(frozen=True)
class GpuLoad:
    gpu: str
    backend: str | None  # None: runs wait for a GPU no dispatcher serves
    target: str
    arch: str | None
    slots: int | None
    queued: int
    running: int


@dataclass(frozen=True)
class RunningJob:
    run_id: str
    gpu: str
    backend: str
    job_ref: str
    attempts: int
    launched_at: datetime
    lease_owner: str | None


async def gpu_loads(conn: asyncpg.Connection) -> list[GpuLoad]:
    return [GpuLoad(**dict(row)) for row in await conn.fetch(GPUS)]


async def running_jobs(conn: asyncpg.Connection) -> list[RunningJob]:
    return [RunningJob(**dict(row)) for row in await conn.fetch(RUNNING)]


async def board_gpus(conn: asyncpg.Connection, leaderboard: str) -> list[str] | None:
    gpus = await conn.fetchval(BOARD_GPUS, leaderboard)
    return None if gpus is None else list(gpus)
