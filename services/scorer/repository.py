"""SQL of the scorer: planned runs, run verdicts, rejudging and hardware (its best table: best_sql.py)."""

from __future__ import annotations

from dataclasses import asdict

import asyncpg

from schemas.events import PlannedRun, SubmissionAccepted
from services.ranking.rules import best_first
from services.scorer.best_repository import FATES
from services.scorer.scoring import BoardEntry, RunVerdict

LOCK_SUBMISSION = "SELECT pg_advisory_xact_lock(8231, $1::int)"
SUBMISSION_INSERT = """
INSERT INTO scorer_submissions (submission_id, leaderboard, user_id, user_name, mode, ranking_by, submitted_at,
                                planned_runs, precheck_hold, precheck_detail)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING
"""
SET_HOLD = "UPDATE scorer_submissions SET precheck_hold = $2 WHERE submission_id = $1"
SUBMISSION = "SELECT * FROM scorer_submissions WHERE submission_id = $1"
# The submission, its runs' verdicts and whether a rerun of it is open, in one round trip: a judging reads them for
# each of its events.
SUBMISSION_AND_VERDICTS = """
SELECT s.*, (SELECT COALESCE(jsonb_object_agg(r.run_id, r.outcome), '{}'::jsonb) FROM scorer_runs r
             WHERE r.submission_id = s.submission_id) AS verdicts,
       EXISTS (SELECT 1 FROM scorer_reruns x WHERE x.submission_id = s.submission_id AND NOT x.finished)
           AS reruns_open
FROM scorer_submissions s WHERE s.submission_id = $1
"""
RUN_INSERT = """
INSERT INTO scorer_runs (run_id, submission_id, gpu, mode, secret, outcome) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (run_id) DO NOTHING RETURNING 1
"""
VERDICTS = "SELECT run_id, outcome FROM scorer_runs WHERE submission_id = $1"
MARK_FINISHED = "UPDATE scorer_submissions SET finished = true WHERE submission_id = $1"
TOP = f"""
SELECT user_id, user_name, score, submission_id FROM scorer_best WHERE leaderboard = $1 AND gpu = $2
ORDER BY {best_first()} LIMIT $3
"""
async def lock_submission(conn: asyncpg.Connection, submission_id: int) -> None:
    """Serialise every decision about one submission, whichever of its events arrives first."""
    await conn.execute(LOCK_SUBMISSION, submission_id % 2_000_000_000)


async def add_submission(conn: asyncpg.Connection, event: SubmissionAccepted) -> None:
    held = event.precheck is not None and event.precheck.outcome == "hacked"
    await conn.execute(
        SUBMISSION_INSERT, event.submission_id, event.leaderboard, event.user_id, event.user_name, event.mode,
        event.ranking_by, event.submitted_at, [r.model_dump() for r in event.runs],
        "hacked" if held else None, event.precheck.detail if held else None,
    )


async def remember_clear(conn: asyncpg.Connection, submission_id: int, change_id: str) -> None:
    await conn.execute("INSERT INTO scorer_precheck_clears (submission_id, change_id) VALUES ($1, $2) "
                       "ON CONFLICT DO NOTHING", submission_id, change_id)


async def take_early_clear(conn: asyncpg.Connection, submission_id: int) -> bool:
    """Whether a clearing arrived before this submission's acceptance (and forget it)."""
    return await conn.fetchval("DELETE FROM scorer_precheck_clears WHERE submission_id = $1 RETURNING 1",
                               submission_id) is not None


async def set_hold(conn: asyncpg.Connection, submission_id: int, hold: str | None) -> None:
    """`hacked` keeps a submission off the board; `cleared` until the rescore ranking it has run; None: neither."""
    await conn.execute(SET_HOLD, submission_id, hold)


async def settle_cleared(conn: asyncpg.Connection, submission_ids: list[int]) -> None:
    await conn.execute("UPDATE scorer_submissions SET precheck_hold = NULL "
                       "WHERE submission_id = ANY($1::bigint[]) AND precheck_hold = 'cleared'", submission_ids)


async def submission(conn: asyncpg.Connection, submission_id: int):
    row = await conn.fetchrow(SUBMISSION, submission_id)
    return None if row is None else (row, _planned(row))


async def submission_and_verdicts(conn: asyncpg.Connection, submission_id: int):
    """`submission` with its runs' verdicts by run id; None before its acceptance has arrived."""
    row = await conn.fetchrow(SUBMISSION_AND_VERDICTS, submission_id)
    if row is None:
        return None
    return row, _planned(row), {run_id: RunVerdict(**outcome) for run_id, outcome in row["verdicts"].items()}


def _planned(row) -> list[PlannedRun]:
    return [PlannedRun.model_validate(r) for r in row["planned_runs"]]


async def add_verdict(conn: asyncpg.Connection, run_id: str, submission_id: int, gpu: str, mode: str, secret: bool,
                      verdict: RunVerdict) -> bool:
    """False when this run already has a verdict (a duplicate report)."""
    return await conn.fetchval(RUN_INSERT, run_id, submission_id, gpu, mode, secret, asdict(verdict)) is not None


async def verdicts(conn: asyncpg.Connection, submission_id: int) -> dict[str, RunVerdict]:
    rows = await conn.fetch(VERDICTS, submission_id)
    return {r["run_id"]: RunVerdict(**r["outcome"]) for r in rows}


async def mark_finished(conn: asyncpg.Connection, submission_id: int) -> None:
    await conn.execute(MARK_FINISHED, submission_id)


async def top(conn: asyncpg.Connection, leaderboard: str, gpu: str, n: int = 3) -> list[BoardEntry]:
    return [BoardEntry(**dict(r)) for r in await conn.fetch(TOP, leaderboard, gpu, n)]


# --- rejudging ---------------------------------------------------------------------------------------------------

# A deleted submission (alone or with its board: best_repository.FATES) is not judged again: it left the board.
BOARD_SUBMISSIONS = f"""
SELECT sub.* FROM scorer_submissions sub JOIN {FATES} s ON s.submission_id = sub.submission_id
WHERE lower(sub.leaderboard) = lower($1) AND sub.mode = 'leaderboard' AND sub.finished AND NOT s.deleted
ORDER BY sub.submission_id
"""
VERDICTS_OF = "SELECT submission_id, run_id, outcome FROM scorer_runs WHERE submission_id = ANY($1::bigint[])"
# The stored results are the log's own RunCompleted events; a report sent twice counts as its first copy.
COMPLETED_RESULTS = """
SELECT DISTINCT ON (payload->>'run_id') payload->>'run_id' AS run_id, payload->'result' AS result
FROM event_archive WHERE event_type = 'RunCompleted' AND correlation_id = ANY($1::text[])
ORDER BY payload->>'run_id', stream_seq
"""
SET_VERDICT = "UPDATE scorer_runs SET outcome = $2 WHERE run_id = $1"
LOCK_BOARDS = "LOCK TABLE scorer_best IN EXCLUSIVE MODE"


async def board_submissions(conn: asyncpg.Connection, leaderboard: str):
    return await conn.fetch(BOARD_SUBMISSIONS, leaderboard)


async def verdicts_of(conn: asyncpg.Connection, submission_ids: list[int]) -> dict[int, dict[str, RunVerdict]]:
    found: dict[int, dict[str, RunVerdict]] = {}
    for row in await conn.fetch(VERDICTS_OF, submission_ids):
        found.setdefault(row["submission_id"], {})[row["run_id"]] = RunVerdict(**row["outcome"])
    return found


async def completed_results(conn: asyncpg.Connection, submission_ids: list[int]) -> dict[str, dict]:
    rows = await conn.fetch(COMPLETED_RESULTS, [str(i) for i in submission_ids])
    return {r["run_id"]: r["result"] for r in rows}


async def set_verdict(conn: asyncpg.Connection, run_id: str, verdict: RunVerdict) -> None:
    await conn.execute(SET_VERDICT, run_id, asdict(verdict))


async def lock_boards(conn: asyncpg.Connection) -> None:
    """Live judging waits while a board is rebuilt, so no best score slips in between."""
    await conn.execute(LOCK_BOARDS)


RERUN_INSERT = """
INSERT INTO scorer_reruns (rejudge_id, submission_id, planned_runs) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING
"""
OPEN_RERUNS = "SELECT rejudge_id, planned_runs FROM scorer_reruns WHERE submission_id = $1 AND NOT finished"
FINISH_RERUN = "UPDATE scorer_reruns SET finished = true WHERE rejudge_id = $1 AND submission_id = $2"
SET_PLANNED = "UPDATE scorer_submissions SET planned_runs = $2 WHERE submission_id = $1"


async def add_rerun(conn: asyncpg.Connection, rejudge_id: str, submission_id: int, runs: list[dict]) -> None:
    await conn.execute(RERUN_INSERT, rejudge_id, submission_id, runs)


async def open_reruns(conn: asyncpg.Connection, submission_id: int) -> list[tuple[str, list[PlannedRun]]]:
    rows = await conn.fetch(OPEN_RERUNS, submission_id)
    return [(r["rejudge_id"], [PlannedRun.model_validate(p) for p in r["planned_runs"]]) for r in rows]


async def finish_rerun(conn: asyncpg.Connection, rejudge_id: str, submission_id: int,
                       planned: list[PlannedRun]) -> None:
    """The rerun's runs now judge the submission: a later rescore reads their results."""
    await conn.execute(FINISH_RERUN, rejudge_id, submission_id)
    await conn.execute(SET_PLANNED, submission_id, [p.model_dump() for p in planned])


# --- hardware ----------------------------------------------------------------------------------------------------

BOARD_HARDWARE_OFFER = """
INSERT INTO scorer_board_hardware (leaderboard, gpu, hardware, submission_id) VALUES ($1, $2, $3, $4)
ON CONFLICT (leaderboard, gpu) DO NOTHING
"""
BOARD_HARDWARE = "SELECT gpu, hardware FROM scorer_board_hardware WHERE lower(leaderboard) = lower($1)"


async def reference_hardware(conn: asyncpg.Connection, leaderboard: str, gpu: str, hardware: dict[str, str],
                             submission_id: int) -> dict[str, str]:
    """The board's reference hardware on that GPU: the first scored one's, this one's when it is the first."""
    if hardware:
        await conn.execute(BOARD_HARDWARE_OFFER, leaderboard, gpu, hardware, submission_id)
    return (await board_hardware(conn, leaderboard)).get(gpu, {})


async def board_hardware(conn: asyncpg.Connection, leaderboard: str) -> dict[str, dict[str, str]]:
    return {row["gpu"]: row["hardware"] for row in await conn.fetch(BOARD_HARDWARE, leaderboard)}
