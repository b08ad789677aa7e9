"""SQL the gateway reads. The gateway writes nothing: every change travels as an event."""

from __future__ import annotations

from datetime import UTC, datetime

import asyncpg

from services.core.credentials import cli_id_hash
from services.ranking.rules import ranks_ahead

USER_BY_CLI = "SELECT user_id, user_name, banned FROM users WHERE cli_id_sha256 = $1"
USER_BY_WEB = "SELECT user_id, user_name, banned FROM users WHERE web_auth_id_sha256 = $1"
CLI_OWNER = "SELECT user_id FROM users WHERE cli_id_sha256 = $1"
WAS_DELETED = "SELECT deleted FROM submissions WHERE id = $1"
LEADERBOARD = "SELECT * FROM leaderboards WHERE lower(name) = lower($1)"
LEDGER_POSITION = "SELECT COALESCE(max(stream_seq), 0) FROM tracking WHERE consumer = $1"
LEADERBOARDS = "SELECT * FROM leaderboards ORDER BY id"
# What a ranking request needs of its board, with the version of the (board, GPU) standings its cache keys on.
BOARD_STANDING = """
SELECT l.id, l.name, l.gpus, l.deadline, l.visibility, jsonb_strip_nulls(jsonb_build_object('lang', l.task -> 'lang'))
           AS task, COALESCE(v.version, 0) AS standing_version
FROM leaderboards l LEFT JOIN standing_versions v ON v.leaderboard_id = l.id AND v.gpu = $2
WHERE lower(l.name) = lower($1)
"""
STANDING_VERSION = "SELECT version FROM standing_versions WHERE leaderboard_id = $1 AND gpu = $2"
NEXT_SUBMISSION_ID = "SELECT nextval('submission_ids')"
# One statement: the first request with a key takes a fresh id, every retry finds it (two at once: one inserts).
SUBMISSION_FOR_KEY = """
WITH taken AS (
    INSERT INTO submission_keys (user_id, key, submission_id) VALUES ($1, $2, nextval('submission_ids'))
    ON CONFLICT (user_id, key) DO NOTHING RETURNING submission_id
)
SELECT submission_id FROM taken
UNION ALL SELECT submission_id FROM submission_keys WHERE user_id = $1 AND key = $2
LIMIT 1
"""
# Every read below leaves deleted submissions out (docs/http-api.md "A user's submissions"); only the stream reads the
# flag itself.
SUBMISSION = """
SELECT s.*, l.name AS leaderboard_name, j.status AS job_status, j.error AS job_error,
       j.last_heartbeat AS job_last_heartbeat,
       (SELECT p.detail FROM precheck_verdicts p WHERE p.submission_id = s.id AND p.outcome = 'warn')
           AS precheck_warning
FROM submissions s LEFT JOIN leaderboards l ON l.id = s.leaderboard_id LEFT JOIN jobs j ON j.submission_id = s.id
WHERE s.id = $1 AND NOT s.deleted
"""
# Stages of one run share recorded_seq and may share start times: then the harness order decides (docs/authoring.md).
RUN_ORDER = """
ORDER BY recorded_seq, start_time,
         CASE WHEN stage = 'test' THEN 0 WHEN stage = 'benchmark' THEN 1 WHEN stage = 'leaderboard' THEN 3 ELSE 2 END,
         length(stage), stage
"""
SUBMISSION_RUNS = f"SELECT * FROM runs WHERE submission_id = $1 {RUN_ORDER}"
SUBMISSION_STATE = """
SELECT s.deleted, s.done, s.status, j.status AS job_status, j.error AS job_error
FROM submissions s LEFT JOIN jobs j ON j.submission_id = s.id WHERE s.id = $1
"""
RUN_REQUESTS = """
SELECT run_id, gpu, mode, secret, status, backend, error, success, result_error, system
FROM run_requests WHERE submission_id = $1 ORDER BY requested_at, run_id
"""
USER_SUBMISSIONS = """
SELECT s.id, s.file_name, s.submitted_at, s.done, l.name AS leaderboard_name,
       COALESCE((SELECT json_agg(json_build_object('gpu_type', sc.gpu, 'score', sc.score) ORDER BY sc.gpu)
                 FROM scores sc WHERE sc.submission_id = s.id AND s.status <> 'hacked'), '[]'::json) AS runs
FROM submissions s LEFT JOIN leaderboards l ON l.id = s.leaderboard_id
WHERE s.user_id = $1 AND NOT s.deleted AND ($2::integer IS NULL OR s.leaderboard_id = $2)
ORDER BY s.submitted_at DESC, s.id DESC LIMIT $3 OFFSET $4
"""
# Rankings read the standings (migration 0030): one row per user holding the best eligible score, kept by the ledger
# (services/ranking/rules.py says what is eligible and best). A page costs O(limit + offset), whatever the history.
# Ranks are standard competition ranks, 1 + the number of better scores (rules.ranks_ahead): inside the page they
# follow from RANK(); the rows tied with the page's first row may have equals before the page, so theirs is counted.
STANDINGS_PAGE = """
SELECT submission_id, user_id, score, submitted_at, run_id, file_name, user_name FROM standings
WHERE leaderboard_id = $1 AND gpu = $2 ORDER BY score, submitted_at, submission_id LIMIT $3 OFFSET $4
"""
RANKING = f"""
WITH page AS ({STANDINGS_PAGE}), ranked AS (SELECT *, RANK() OVER (ORDER BY score) AS page_rank FROM page)
SELECT submission_id, user_id, score, submitted_at, run_id, file_name, user_name,
       CASE WHEN page_rank = 1
            THEN 1 + (SELECT count(*) FROM standings b WHERE b.leaderboard_id = $1 AND b.gpu = $2
                      AND b.score < (SELECT min(score) FROM page))
            ELSE $4 + page_rank END AS rank
FROM ranked ORDER BY score, submitted_at, submission_id
"""
# One user's standing ranked as RANKING ranks it (ties share a rank): counting the rows ahead walks the standings_rank
# index up to the user's score, O(rank), where reading the ranking through to the user was O(board).
USER_STANDING = f"""
SELECT st.submission_id, st.user_id, st.score, st.submitted_at,
       1 + (SELECT count(*) FROM standings b WHERE b.leaderboard_id = $1 AND b.gpu = $2
                                              AND {ranks_ahead("b", "st")}) AS rank
FROM standings st WHERE st.leaderboard_id = $1 AND st.gpu = $2 AND st.user_id = $3
"""
SUBMISSION_COUNT = """
SELECT COALESCE((SELECT entries FROM standing_versions WHERE leaderboard_id = $1 AND gpu = $2), 0) AS users,
       COALESCE((SELECT eligible_runs FROM standings WHERE leaderboard_id = $1 AND gpu = $2 AND user_id = $3), 0)
           AS user_runs
"""
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
# A poll of popcorn-cli in one round trip: the caller by CLI id digest ($1), its submission ($2) as SUBMISSION reads
# it, its runs in SUBMISSION_RUNS's order with what views.stage_run reads (`run_rows`, JSON: times as UTC text with
# microseconds, see poll_runs), and its GPU's queue as KNOWN_QUEUE reads it.
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
HAS_INVITE = "SELECT EXISTS (SELECT 1 FROM invites WHERE user_id = $1 AND $2::integer = ANY(leaderboard_ids))"
INVITED_BOARDS = "SELECT DISTINCT unnest(leaderboard_ids) AS id FROM invites WHERE user_id = $1"
# What admission (docs/http-api.md "Submitting") reads, in one round trip: intake, the board (NULL columns when there is
# none), whether the caller holds an invite to it, and its limit for the category.
ADMISSION = """
SELECT NOT EXISTS (SELECT 1 FROM intake WHERE NOT accepting) AS accepting, l.id, l.name, l.gpus, l.deadline,
       l.task, l.visibility,
       l.id IS NOT NULL AND EXISTS (SELECT 1 FROM invites i WHERE i.user_id = $2 AND l.id = ANY(i.leaderboard_ids))
           AS invited,
       (SELECT max_submissions_per_hour FROM rate_limits r WHERE r.leaderboard_id = l.id AND r.mode_category = $3)
           AS rate_max
FROM (SELECT 1) AS one LEFT JOIN leaderboards l ON lower(l.name) = lower($1)
"""
# Accepted (or not yet judged) submissions count against a rate limit, deleted ones too: deleting must not buy slots.
RECENT_SUBMISSIONS = """
SELECT submitted_at FROM submissions
WHERE user_id = $1 AND leaderboard_id = $2 AND submitted_at > $4 AND mode = ANY($3::text[]) AND status <> 'rejected'
"""
# Judged once the dispatcher rejected it, or accepted it and its runs are recorded (so the queue counts it).
DECISION = """
SELECT s.status, s.done, EXISTS (SELECT 1 FROM run_requests r WHERE r.submission_id = s.id) AS planned
FROM submissions s WHERE s.id = $1
"""
REJECTION = """
SELECT payload FROM event_archive WHERE correlation_id = $1 AND event_type = 'SubmissionRejected'
ORDER BY stream_seq LIMIT 1
"""
# Postgres bigint; larger ids name nothing and larger offsets skip everything.
MAX_BIGINT = 2**63 - 1


async def user_by_cli(pool: asyncpg.Pool, cli_id: str):
    """The user a presented (clear) CLI id authenticates; only its digest is stored and sent to the database."""
    return await pool.fetchrow(USER_BY_CLI, cli_id_hash(cli_id))


async def user_by_web(pool: asyncpg.Pool, web_id: str):
    return await pool.fetchrow(USER_BY_WEB, cli_id_hash(web_id))  # web ids are stored hashed like CLI ids


async def cli_owner(pool: asyncpg.Pool, cli_id: str) -> str | None:
    return await pool.fetchval(CLI_OWNER, cli_id_hash(cli_id))


async def leaderboard(pool: asyncpg.Pool, name: str):
    return await pool.fetchrow(LEADERBOARD, name)


async def board_standing(pool: asyncpg.Pool, name: str, gpu: str):
    return await pool.fetchrow(BOARD_STANDING, name, gpu)


async def standing_version(pool: asyncpg.Pool, leaderboard_id: int, gpu: str) -> int:
    return await pool.fetchval(STANDING_VERSION, leaderboard_id, gpu) or 0


async def leaderboards(pool: asyncpg.Pool):
    return await pool.fetch(LEADERBOARDS)


async def next_submission_id(pool: asyncpg.Pool) -> int:
    return await pool.fetchval(NEXT_SUBMISSION_ID)


async def submission_for_key(pool: asyncpg.Pool, user_id: str, key: str) -> int:
    """The submission id this user's idempotency key stands for, taken on first use."""
    for _ in range(3):  # a concurrent first use commits between our insert and our read: read again
        found = await pool.fetchval(SUBMISSION_FOR_KEY, user_id, key)
        if found is not None:
            return found
    raise RuntimeError("idempotency key could not be resolved")


async def was_deleted(pool: asyncpg.Pool, submission_id: int) -> bool:
    return bool(await pool.fetchval(WAS_DELETED, submission_id))


async def submission(pool: asyncpg.Pool, submission_id: int):
    if abs(submission_id) > MAX_BIGINT:
        return None
    return await pool.fetchrow(SUBMISSION, submission_id)


async def submission_state(pool: asyncpg.Pool, submission_id: int):
    return await pool.fetchrow(SUBMISSION_STATE, submission_id)


async def run_requests(pool: asyncpg.Pool, submission_id: int):
    return await pool.fetch(RUN_REQUESTS, submission_id)


async def user_submissions(pool: asyncpg.Pool, user_id: str, leaderboard_id: int | None, limit: int, offset: int):
    return await pool.fetch(USER_SUBMISSIONS, user_id, leaderboard_id, limit, min(offset, MAX_BIGINT))


async def submission_runs(pool: asyncpg.Pool, submission_id: int):
    return await pool.fetch(SUBMISSION_RUNS, submission_id)


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


async def ranking(pool: asyncpg.Pool, leaderboard_id: int, gpu: str, limit: int | None, offset: int):
    return await pool.fetch(RANKING, leaderboard_id, gpu, limit, min(offset, MAX_BIGINT))


async def user_standing(pool: asyncpg.Pool, leaderboard_id: int, gpu: str, user_id: str):
    """The user's standing on the board and GPU (their best submission and its rank); None when they have none."""
    return await pool.fetchrow(USER_STANDING, leaderboard_id, gpu, user_id)


async def submission_count(pool: asyncpg.Pool, leaderboard_id: int, gpu: str, user_id: str | None) -> int:
    row = await pool.fetchrow(SUBMISSION_COUNT, leaderboard_id, gpu, user_id)
    return row["users"] if user_id is None else row["user_runs"]


async def has_invite(pool: asyncpg.Pool, user_id: str, leaderboard_id: int) -> bool:
    """Whether a claimed invite opens a closed leaderboard to this user."""
    return await pool.fetchval(HAS_INVITE, user_id, leaderboard_id)


async def invited_boards(pool: asyncpg.Pool, user_id: str) -> set[int]:
    return {row["id"] for row in await pool.fetch(INVITED_BOARDS, user_id)}


async def ping(pool: asyncpg.Pool, timeout_s: float) -> None:
    await pool.fetchval("SELECT 1", timeout=timeout_s)


async def queue(pool: asyncpg.Pool, gpu: str, submission_id: int | None = None):
    """The GPU's canonical name and its queue, with where `submission_id` waits in it; None for an unknown GPU."""
    mine = submission_id if submission_id is not None and abs(submission_id) <= MAX_BIGINT else None
    row = await pool.fetchrow(KNOWN_QUEUE, gpu, mine)
    if row is None:
        return None
    return row["gpu"], row, submission_id is not None


async def admission(pool: asyncpg.Pool, leaderboard: str, user_id: str, category: str):
    return await pool.fetchrow(ADMISSION, leaderboard, user_id, category)


async def recent_submissions(pool: asyncpg.Pool, user_id: str, leaderboard_id: int, modes: tuple[str, ...],
                             since) -> tuple:
    return tuple(row["submitted_at"] for row in await pool.fetch(RECENT_SUBMISSIONS, user_id, leaderboard_id,
                                                                  list(modes), since))


async def decision(pool: asyncpg.Pool, submission_id: int):
    return await pool.fetchrow(DECISION, submission_id)


async def rejection(pool: asyncpg.Pool, submission_id: int) -> dict | None:
    return await pool.fetchval(REJECTION, str(submission_id))


async def ledger_position(pool: asyncpg.Pool, consumer: str) -> int:
    """The last stream sequence the ledger applied (it applies the stream in order)."""
    return int(await pool.fetchval(LEDGER_POSITION, consumer))
