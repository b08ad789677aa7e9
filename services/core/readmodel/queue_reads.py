"""A GPU's queue as the read model holds it: the unfinished planned runs, and where one submission waits in them."""

from __future__ import annotations

import asyncpg

from services.core.readmodel.submission_reads import MAX_BIGINT

# Queues are read from the unfinished planned runs (one row per payload on a GPU), in one pass over a partial index:
# never the backlog of jobs joined with submissions. A submission has exactly one public run per GPU, so counting
# public runs counts submissions without a DISTINCT. With a submission ($2), also the runs waiting before its first.
QUEUE = """
WITH mine AS (SELECT min(requested_at) AS at FROM run_requests WHERE submission_id = $2 AND gpu = $1
              AND status = 'queued')
SELECT count(*) FILTER (WHERE status = 'queued' AND NOT secret) AS queued,
       count(*) FILTER (WHERE status <> 'queued' AND NOT secret) AS running,
       count(*) FILTER (WHERE status = 'queued') AS queued_runs,
       count(*) FILTER (WHERE status <> 'queued') AS running_runs,
       (SELECT at FROM mine) IS NOT NULL AS waiting,
       count(*) FILTER (WHERE status = 'queued' AND NOT secret AND requested_at < (SELECT at FROM mine))
           AS submissions_ahead,
       count(*) FILTER (WHERE status = 'queued' AND requested_at < (SELECT at FROM mine)) AS runs_ahead,
       (SELECT backend FROM run_requests WHERE lower(gpu) = lower($1) AND backend IS NOT NULL
        ORDER BY requested_at DESC LIMIT 1) AS backend,
       (SELECT avg(extract(epoch FROM finished_at - started_at)) FROM (
            SELECT finished_at, started_at FROM run_requests
            WHERE gpu = $1 AND status = 'completed' AND started_at IS NOT NULL
            ORDER BY finished_at DESC LIMIT 20) AS recent) AS mean_run_s
FROM run_requests WHERE gpu = $1 AND status IN ('queued', 'dispatched', 'running')
"""
KNOWN_GPU = "SELECT g FROM leaderboards, unnest(gpus) AS g WHERE lower(g) = lower($1) LIMIT 1"
# The GPU's canonical name and its queue in one round trip (polls read it every time): no row for an unknown GPU.
KNOWN_QUEUE = f"""
SELECT known.g AS gpu, q.* FROM ({KNOWN_GPU}) AS known
CROSS JOIN LATERAL ({QUEUE.replace("$1", "known.g")}) AS q
"""


async def queue(pool: asyncpg.Pool, gpu: str, submission_id: int | None = None):
    """The GPU's canonical name and its queue, with where `submission_id` waits in it; None for an unknown GPU."""
    mine = submission_id if submission_id is not None and abs(submission_id) <= MAX_BIGINT else None
    row = await pool.fetchrow(KNOWN_QUEUE, gpu, mine)
    if row is None:
        return None
    return row["gpu"], row, submission_id is not None
