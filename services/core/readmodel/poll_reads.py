"""A poll of popcorn-cli in one round trip: the caller, its submission, its runs and its GPU's queue."""

from __future__ import annotations

from datetime import UTC, datetime

import asyncpg

from schemas.credentials import cli_id_hash
from services.core.readmodel.queue_reads import KNOWN_QUEUE
from services.core.readmodel.submission_reads import RUN_ORDER, SUBMISSION

# The caller by CLI id digest ($1), its submission ($2) as SUBMISSION reads it, its runs in SUBMISSION_RUNS's order
# with what views.stage_run reads (`run_rows`, JSON: times as UTC text with microseconds, see poll_runs), and its
# GPU's queue as KNOWN_QUEUE reads it.
# No row: the CLI id is unknown. `id` NULL: no such submission (or deleted). `gpu` NULL: an unknown GPU.
UTC_TEXT = """to_char({} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US')"""
POLL = f"""
SELECT u.user_id AS caller_id, sub.*,
       (SELECT COALESCE(json_agg(json_build_object(
                   'start_time', {UTC_TEXT.format("start_time")}, 'end_time', {UTC_TEXT.format("end_time")},
                   'stage', stage, 'secret', secret, 'gpu', gpu, 'score', score, 'passed', passed, 'result', result)
                   {RUN_ORDER}), '[]')
        FROM runs WHERE submission_id = sub.id) AS run_rows,
       queue.*
FROM users u
LEFT JOIN LATERAL ({SUBMISSION.replace("$1", "$2")}) AS sub ON true
LEFT JOIN LATERAL ({KNOWN_QUEUE.replace("$1", "sub.gpus[1]")}) AS queue ON true
WHERE u.cli_id_sha256 = $1
"""


async def poll(pool: asyncpg.Pool, cli_id: str, submission_id: int):
    """POLL's row (see there) for a presented (clear) CLI id; `submission_id` must fit a bigint."""
    return await pool.fetchrow(POLL, cli_id_hash(cli_id), submission_id)


def poll_runs(row) -> list[dict]:
    """POLL's runs as SUBMISSION_RUNS rows read (the fields views.stage_run uses): UTC datetimes, float scores."""
    runs = row["run_rows"]
    for run in runs:
        for key in ("start_time", "end_time"):
            if run[key] is not None:
                run[key] = datetime.fromisoformat(run[key]).replace(tzinfo=UTC)
        if isinstance(run["score"], str):  # NaN and the infinities are JSON strings
            run["score"] = float(run["score"])
    return runs
