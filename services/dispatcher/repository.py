"""SQL of the dispatcher: leaderboard lookups and the durable run queue with leases."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg

from schemas.contracts import Task
from services.core.admission.policy import LeaderboardView

LEADERBOARD = """
SELECT id, name, gpus, deadline, task, ranking_by, visibility FROM leaderboards
WHERE lower(name) = lower($1)
"""
ENQUEUE = """
INSERT INTO dispatch_runs (run_id, submission_id, gpu, payload, timeout_s) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (run_id) DO NOTHING
"""
NOTIFY_QUEUE = "SELECT pg_notify('kb_dispatch', $1)"
SEED_KEY = "SELECT seed_key FROM dispatch_seed_keys WHERE leaderboard_id = $1"
# Two dispatchers drawing a board's first key at once: the second blocks on the first's row and returns its key
# (the no-op update makes RETURNING yield the row that won).
DRAW_SEED_KEY = """
INSERT INTO dispatch_seed_keys (leaderboard_id, seed_key) VALUES ($1, $2)
ON CONFLICT (leaderboard_id) DO UPDATE SET seed_key = dispatch_seed_keys.seed_key
RETURNING seed_key
"""
# Our own unfinished runs from a previous life are claimed again: they are resumed, not relaunched. A claim keeps
# the attempt number (only a requeue raises it), so the launch key of an attempt is the same whoever claims it.
CLAIM = """
UPDATE dispatch_runs SET lease_owner = $3, lease_until = now() + make_interval(secs => $4),
       attempts = GREATEST(attempts, 1)
WHERE run_id IN (
    SELECT run_id FROM dispatch_runs
    WHERE gpu = $1 AND status <> 'finished'
      AND (status = 'queued' AND lease_owner IS NULL
           OR lease_until < now()
           OR (lease_owner = $3 AND NOT (run_id = ANY($5::text[]))))
    ORDER BY enqueued_at, run_id LIMIT $2 FOR UPDATE SKIP LOCKED)
RETURNING run_id, submission_id, gpu, payload, timeout_s, status, attempts, job_ref, launched_at
"""
# A re-recorded launch (the same job found again by its launch key) keeps the first launch time: the job's clock.
MARK_LAUNCHED = """
UPDATE dispatch_runs SET status = 'launched', backend = $2,
       launched_at = CASE WHEN job_ref = $3 THEN launched_at ELSE now() END, job_ref = $3
WHERE run_id = $1 AND lease_owner = $4 AND status <> 'finished'
RETURNING launched_at
"""
REQUEUE = """
UPDATE dispatch_runs SET status = 'queued', job_ref = NULL, lease_owner = NULL, lease_until = NULL,
       attempts = attempts + 1
WHERE run_id = $1 AND lease_owner = $2 AND status <> 'finished'
"""
ANNOUNCE_GPU = """
INSERT INTO dispatch_gpus (gpu, backend, target, arch, slots, lacks, announced_by, announced_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, now())
ON CONFLICT (gpu) DO UPDATE SET backend = EXCLUDED.backend, target = EXCLUDED.target, arch = EXCLUDED.arch,
       slots = EXCLUDED.slots, lacks = EXCLUDED.lacks, announced_by = EXCLUDED.announced_by,
       announced_at = EXCLUDED.announced_at
"""
MARK_FINISHED = """
UPDATE dispatch_runs SET status = 'finished', finished_at = now(), lease_owner = NULL
WHERE run_id = $1 AND status <> 'finished' RETURNING submission_id
"""
RENEW = """
UPDATE dispatch_runs SET lease_until = now() + make_interval(secs => $2)
WHERE run_id = ANY($1::text[]) AND lease_owner = $3
"""


@dataclass(frozen=True)
class Board:
    id: int
    view: LeaderboardView
    task: Task
    ranking_by: str


@dataclass(frozen=True)
class ClaimedRun:
    run_id: str
    submission_id: int
    gpu: str
    payload: dict
    timeout_s: int
    status: str
    attempts: int
    job_ref: str | None
    launched_at: datetime | None = None


async def board(conn: asyncpg.Connection, name: str) -> Board | None:
    row = await conn.fetchrow(LEADERBOARD, name)
    if row is None:
        return None
    task = Task.model_validate(row["task"])
    view = LeaderboardView(name=row["name"], gpus=tuple(row["gpus"]), deadline=row["deadline"], lang=task.lang,
                           visibility=row["visibility"], benchmarks=len(task.benchmarks))
    return Board(id=row["id"], view=view, task=task, ranking_by=row["ranking_by"])


async def seed_key(conn: asyncpg.Connection, leaderboard_id: int, drawn: bytes) -> bytes:
    """The board's seed key; `drawn` becomes it when the board has none yet."""
    found = await conn.fetchval(SEED_KEY, leaderboard_id)
    return bytes(found if found is not None else await conn.fetchval(DRAW_SEED_KEY, leaderboard_id, drawn))


async def enqueue(conn: asyncpg.Connection, run_id: str, submission_id: int, gpu: str, payload: dict,
                  timeout_s: int) -> None:
    await conn.execute(ENQUEUE, run_id, submission_id, gpu, payload, timeout_s)
    await conn.execute(NOTIFY_QUEUE, gpu)


# A rerun repeats what ranks: the submissions with a score on the board (on the GPU asked for), with their code.
RERUN_SUBMISSIONS = """
SELECT s.id AS submission_id, s.code, array_agg(sc.gpu ORDER BY sc.gpu) AS gpus
FROM scores sc JOIN submissions s ON s.id = sc.submission_id JOIN leaderboards l ON l.id = sc.leaderboard_id
WHERE lower(l.name) = lower($1) AND ($2::text IS NULL OR sc.gpu = $2) AND NOT s.deleted
GROUP BY s.id, s.code ORDER BY s.id
"""


async def rerun_submissions(conn: asyncpg.Connection, leaderboard: str, gpu: str | None):
    return await conn.fetch(RERUN_SUBMISSIONS, leaderboard, gpu)


async def claim(pool: asyncpg.Pool, gpu: str, limit: int, owner: str, lease_s: float,
                active: list[str]) -> list[ClaimedRun]:
    rows = await pool.fetch(CLAIM, gpu, limit, owner, lease_s, active)
    return [ClaimedRun(**{k: r[k] for k in ClaimedRun.__dataclass_fields__}) for r in rows]


async def mark_launched(conn: asyncpg.Connection, run_id: str, backend: str, job_ref: str,
                        owner: str) -> datetime | None:
    """The launch time of the job, or None when the run is no longer ours to record."""
    return await conn.fetchval(MARK_LAUNCHED, run_id, backend, job_ref, owner)


async def requeue(pool: asyncpg.Pool, run_id: str, owner: str) -> None:
    await pool.execute(REQUEUE, run_id, owner)


async def announce_gpus(pool: asyncpg.Pool, gpus: list[tuple[str, str, str, str | None, int, str | None]],
                        owner: str) -> None:
    """Tell operators (`kernelbot runners`) which backend serves each GPU name: (gpu, backend, target, arch, slots,
    lacks), `lacks` saying what an inactive default GPU needs (None: served)."""
    await pool.executemany(ANNOUNCE_GPU, [(*gpu, owner) for gpu in gpus])


REPORTED_RUN = "SELECT submission_id, gpu, payload, backend FROM dispatch_runs WHERE run_id = $1"


async def reported_run(conn: asyncpg.Connection, run_id: str):
    """What the dispatcher planned for a run a runner reports: submission, GPU, payload, backend; None if unknown."""
    return await conn.fetchrow(REPORTED_RUN, run_id)


RUN_FINISHED = "SELECT status = 'finished' FROM dispatch_runs WHERE run_id = $1"


async def run_finished(pool: asyncpg.Pool, run_id: str) -> bool:
    """Whether the run has its end recorded (by a runner's own report, for runs whose backend collects nothing)."""
    return bool(await pool.fetchval(RUN_FINISHED, run_id))


async def mark_finished(conn: asyncpg.Connection, run_id: str) -> bool:
    return await conn.fetchval(MARK_FINISHED, run_id) is not None


async def renew(pool: asyncpg.Pool, run_ids: list[str], lease_s: float, owner: str) -> None:
    if run_ids:
        await pool.execute(RENEW, run_ids, lease_s, owner)
