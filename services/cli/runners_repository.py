"""What the operator commands `kernelbot runners` and `verify-runs` read of the dispatcher's tables."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

import asyncpg

# Every GPU a dispatcher announced, and every GPU with unfinished runs (one nobody serves shows as such).
GPUS = """
WITH counts AS (
    SELECT gpu, count(*) FILTER (WHERE status = 'queued') AS queued,
           count(*) FILTER (WHERE status = 'launched') AS running
    FROM dispatch_runs WHERE status <> 'finished' GROUP BY gpu)
SELECT coalesce(g.gpu, c.gpu) AS gpu, g.backend, coalesce(g.target, '') AS target, g.arch, g.slots, g.lacks,
       coalesce(c.queued, 0) AS queued, coalesce(c.running, 0) AS running
FROM dispatch_gpus g FULL JOIN counts c ON c.gpu = g.gpu
ORDER BY 1
"""
RUNNING = """
SELECT run_id, gpu, backend, job_ref, attempts, launched_at, lease_owner FROM dispatch_runs
WHERE status = 'launched' ORDER BY gpu, launched_at
"""
BOARD_GPUS = "SELECT gpus FROM leaderboards WHERE lower(name) = lower($1)"
# Each run's stage stamps as the runner reported them (EvalResult.timing): where its start-up time goes.
STAGE_TIMINGS = """
SELECT payload->>'run_id' AS run_id, key AS stage, value->'timing' AS timing
FROM event_archive, jsonb_each(payload->'result'->'runs')
WHERE event_type = 'RunCompleted' AND correlation_id = $1
ORDER BY stream_seq
"""


@dataclass(frozen=True)
class GpuLoad:
    gpu: str
    backend: str | None  # None: runs wait for a GPU no dispatcher serves
    target: str
    arch: str | None
    slots: int | None
    lacks: str | None  # an inactive default GPU: what its backend needs; None: served (or unknown)
    queued: int
    running: int

    @property
    def served(self) -> bool:
        return self.backend is not None and self.lacks is None


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


async def stage_timings(conn: asyncpg.Connection, submission_id: int) -> list[tuple[str, str, dict]]:
    """(run id, stage, timing) of every stage the submission's runs reported."""
    rows = await conn.fetch(STAGE_TIMINGS, str(submission_id))
    return [(row["run_id"], row["stage"], json.loads(row["timing"]) if row["timing"] else {}) for row in rows]
