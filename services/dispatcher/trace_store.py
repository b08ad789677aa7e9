"""SQL of profile traces kept out of RunCompleted (migrations/0110_profile_traces.sql).

A profile's base64 zips can reach tens of MB, past the 8 MiB NATS allows one event. As the dispatcher records a run
it moves each stage's trace into `profile_traces`, in the transaction that records the run, and the event carries the
stage with an empty trace; the gateway reads the traces back (docs/quickstart.md, "Profiling").
"""

from __future__ import annotations

import asyncpg

from schemas.contracts import FullResult

KEEP = """
INSERT INTO profile_traces (run_id, stage, submission_id, gpu, trace)
SELECT $1, stage, $2, $3, trace FROM unnest($4::text[], $5::text[]) AS t(stage, trace)
ON CONFLICT (run_id, stage) DO UPDATE SET trace = EXCLUDED.trace
"""


async def keep_traces(conn: asyncpg.Connection, run_id: str, submission_id: int, gpu: str,
                      result: FullResult) -> FullResult:
    """`result` with every profile trace moved into the table (an empty trace in its place)."""
    traced = {stage: evaluation for stage, evaluation in result.runs.items()
              if evaluation.profile is not None and evaluation.profile.trace}
    if not traced:
        return result
    await conn.execute(KEEP, run_id, submission_id, gpu, list(traced),
                       [evaluation.profile.trace for evaluation in traced.values() if evaluation.profile])
    runs = {**result.runs, **{stage: evaluation.model_copy(update={
        "profile": evaluation.profile.model_copy(update={"trace": ""}) if evaluation.profile else None})
        for stage, evaluation in traced.items()}}
    return result.model_copy(update={"runs": runs})
