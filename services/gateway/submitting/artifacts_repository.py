"""SQL of the profile artifacts the gateway serves: a profiled stage's zip, kept in its run's result (the ledger's
runs table), with the submission's owner."""

from __future__ import annotations

import asyncpg

ARTIFACT = """
SELECT s.user_id, r.result->'profile'->>'trace' AS trace
FROM runs r JOIN submissions s ON s.id = r.submission_id
WHERE r.submission_id = $1 AND r.gpu = $2 AND r.stage = $3 AND NOT r.secret AND NOT s.deleted
ORDER BY r.end_time DESC NULLS LAST LIMIT 1
"""


async def artifact(pool: asyncpg.Pool, submission_id: int, gpu: str, stage: str):
    """(user_id, trace) of a profiled stage, None when there is none (or the submission was deleted)."""
    return await pool.fetchrow(ARTIFACT, submission_id, gpu, stage)
