"""SQL of the profile artifacts the gateway serves: a profiled stage's zip, kept in `profile_traces` by the dispatcher
as it records the run (migrations/0110_profile_traces.sql), or, for runs recorded before, in the run's result (the
ledger's runs table), with the submission's owner."""

from __future__ import annotations

import dataclasses

import asyncpg

from services.core.presentation.results import RunOutcome

ARTIFACT = """
SELECT s.user_id, COALESCE(NULLIF(r.result->'profile'->>'trace', ''), t.trace) AS trace
FROM runs r JOIN submissions s ON s.id = r.submission_id
LEFT JOIN profile_traces t ON t.submission_id = r.submission_id AND t.gpu = r.gpu AND t.stage = r.stage
WHERE r.submission_id = $1 AND r.gpu = $2 AND r.stage = $3 AND NOT r.secret AND NOT s.deleted
ORDER BY r.end_time DESC NULLS LAST, t.created_at DESC NULLS LAST LIMIT 1
"""
TRACES = """
SELECT DISTINCT ON (gpu, stage) gpu, stage, trace FROM profile_traces WHERE submission_id = $1
ORDER BY gpu, stage, created_at DESC
"""


async def artifact(pool: asyncpg.Pool, submission_id: int, gpu: str, stage: str):
    """(user_id, trace) of a profiled stage, None when there is none (or the submission was deleted)."""
    return await pool.fetchrow(ARTIFACT, submission_id, gpu, stage)


async def with_traces(pool: asyncpg.Pool, submission_id: int, outcomes: list[RunOutcome]) -> list[RunOutcome]:
    """The public outcomes with each profiled stage's trace put back where the read model holds an empty one."""
    kept = {(row["gpu"], row["stage"]): row["trace"] for row in await pool.fetch(TRACES, submission_id)}
    if not kept:
        return outcomes
    completed = []
    for outcome in outcomes:
        runs = dict(outcome.result.get("runs") or {})
        for stage, evaluation in runs.items():
            profile = (evaluation or {}).get("profile")
            if not outcome.secret and profile is not None and not profile.get("trace") \
                    and (outcome.gpu, stage) in kept:
                runs[stage] = {**evaluation, "profile": {**profile, "trace": kept[(outcome.gpu, stage)]}}
        completed.append(dataclasses.replace(outcome, result={**outcome.result, "runs": runs}))
    return completed
