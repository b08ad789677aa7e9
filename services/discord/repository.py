"""SQL of the Discord bot: its own state (migration 0010) and the reads of the shared read model it needs."""

from __future__ import annotations

from datetime import datetime

import asyncpg

TRACK_SUBMISSION = """
INSERT INTO discord_submissions (submission_id, user_id, user_name, leaderboard, mode, gpus, channel_id,
                                 application_id, interaction_token, token_issued_at, original_message_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
"""
TRACKED = "SELECT * FROM discord_submissions WHERE submission_id = $1"
TRACKED_FOR_UPDATE = "SELECT * FROM discord_submissions WHERE submission_id = $1 FOR UPDATE"
SET_RUN_LINE = """
UPDATE discord_submissions
SET run_lines = jsonb_set(run_lines, ARRAY[$2::text], to_jsonb($3::text)),
    run_order = CASE WHEN $2 = ANY(run_order) THEN run_order ELSE array_append(run_order, $2::text) END
WHERE submission_id = $1
"""
FINISH = "UPDATE discord_submissions SET final_line = $2, finished = true WHERE submission_id = $1"
ADD_RUN = """
INSERT INTO discord_runs (run_id, submission_id, gpu) VALUES ($1, $2, $3) ON CONFLICT (run_id) DO NOTHING
"""
RUN = "SELECT * FROM discord_runs WHERE run_id = $1"
SET_THREAD = "UPDATE discord_runs SET thread_id = $2 WHERE run_id = $1"
REQUEST_THREAD = """
INSERT INTO discord_runs (run_id, submission_id, gpu, thread_requested) VALUES ($1, $2, $3, true)
ON CONFLICT (run_id) DO UPDATE SET thread_requested = true
"""
ENQUEUE = "INSERT INTO discord_outbox (kind, submission_id, body) VALUES ($1, $2, $3)"
PENDING = """
SELECT * FROM discord_outbox WHERE delivered_at IS NULL AND not_before <= now() ORDER BY id LIMIT $1
"""
LATER_STATUS = """
SELECT EXISTS (SELECT 1 FROM discord_outbox WHERE kind = 'status' AND submission_id = $1 AND id > $2
               AND delivered_at IS NULL)
"""
DELIVERED = "UPDATE discord_outbox SET delivered_at = now(), error = $2 WHERE id = $1"
POSTPONE = """
UPDATE discord_outbox SET attempts = attempts + 1, not_before = now() + make_interval(secs => $2), error = $3
WHERE id = $1
"""
FORUM_THREAD = "SELECT * FROM discord_forum_threads WHERE leaderboard = $1"
STORE_FORUM_THREAD = """
INSERT INTO discord_forum_threads (leaderboard, thread_id, gpus) VALUES ($1, $2, $3)
ON CONFLICT (leaderboard) DO UPDATE SET thread_id = EXCLUDED.thread_id, gpus = EXCLUDED.gpus
"""
FORGET_FORUM_THREAD = "DELETE FROM discord_forum_threads WHERE leaderboard = $1"
BOARDS_WITHOUT_POST = """
SELECT l.name, l.gpus FROM leaderboards l
WHERE l.visibility = 'public' AND NOT EXISTS (SELECT 1 FROM discord_forum_threads f WHERE f.leaderboard = l.name)
ORDER BY l.name
"""
# --- the shared read model ---
# Registered users by their names, and Discord submitters the platform knows only from their submissions.
USER_NAMES = """
SELECT user_id, user_name FROM users
UNION ALL
(SELECT DISTINCT ON (user_id) user_id, user_name FROM submissions s
 WHERE NOT EXISTS (SELECT 1 FROM users u WHERE u.user_id = s.user_id)
 ORDER BY user_id, submitted_at DESC)
"""
USER = "SELECT user_id, user_name, banned FROM users WHERE user_id = $1"
ACTIVE_BOARDS = "SELECT name FROM leaderboards WHERE deadline > now() ORDER BY name"
BOARD_SCORE = """
SELECT sc.score FROM scores sc WHERE sc.submission_id = $1 AND sc.gpu = $2
"""
EARLIER_SCORES = """
SELECT count(*) FROM scores sc JOIN submissions s ON s.id = sc.submission_id
WHERE sc.leaderboard_id = $1 AND sc.gpu = $2 AND sc.user_id = $3 AND sc.submission_id <> $4 AND NOT s.deleted
"""
RECENT_SUBMISSIONS = """
SELECT submitted_at FROM submissions
WHERE user_id = $1 AND leaderboard_id = $2 AND submitted_at > $3 AND status <> 'rejected' AND NOT deleted
  AND (CASE WHEN mode = 'leaderboard' THEN 'leaderboard' ELSE 'test' END) = $4
"""


async def track_submission(conn, *, submission_id: int, user_id: str, user_name: str, leaderboard: str, mode: str,
                           gpus: list[str], channel_id: int, application_id: int, token: str, issued_at: datetime,
                           message_id: int | None) -> None:
    await conn.execute(TRACK_SUBMISSION, submission_id, user_id, user_name, leaderboard, mode, gpus, channel_id,
                       application_id, token, issued_at, message_id)


async def tracked(conn, submission_id: int, *, lock: bool = False):
    return await conn.fetchrow(TRACKED_FOR_UPDATE if lock else TRACKED, submission_id)


async def set_run_line(conn, submission_id: int, run_id: str, text: str) -> None:
    await conn.execute(SET_RUN_LINE, submission_id, run_id, text)


async def finish(conn, submission_id: int, line: str) -> None:
    await conn.execute(FINISH, submission_id, line)


async def add_run(conn, run_id: str, submission_id: int, gpu: str) -> None:
    await conn.execute(ADD_RUN, run_id, submission_id, gpu)


async def run(conn, run_id: str):
    return await conn.fetchrow(RUN, run_id)


async def request_thread(pool: asyncpg.Pool, run_id: str, submission_id: int, gpu: str) -> None:
    await pool.execute(REQUEST_THREAD, run_id, submission_id, gpu)


async def store_thread(pool: asyncpg.Pool, run_id: str, thread_id: int) -> None:
    await pool.execute(SET_THREAD, run_id, thread_id)


async def enqueue(conn, kind: str, submission_id: int | None, body: dict) -> None:
    await conn.execute(ENQUEUE, kind, submission_id, body)


async def pending(pool: asyncpg.Pool, limit: int = 20):
    return await pool.fetch(PENDING, limit)


async def later_status_pending(pool: asyncpg.Pool, submission_id: int, outbox_id: int) -> bool:
    return await pool.fetchval(LATER_STATUS, submission_id, outbox_id)


async def delivered(pool: asyncpg.Pool, outbox_id: int, error: str | None = None) -> None:
    await pool.execute(DELIVERED, outbox_id, error)


async def postpone(pool: asyncpg.Pool, outbox_id: int, delay_s: float, error: str) -> None:
    await pool.execute(POSTPONE, outbox_id, delay_s, error[:500])


async def forum_thread(pool: asyncpg.Pool, leaderboard: str):
    return await pool.fetchrow(FORUM_THREAD, leaderboard)


async def store_forum_thread(pool: asyncpg.Pool, leaderboard: str, thread_id: int, gpus: list[str]) -> None:
    await pool.execute(STORE_FORUM_THREAD, leaderboard, thread_id, gpus)


async def forget_forum_thread(pool: asyncpg.Pool, leaderboard: str) -> None:
    await pool.execute(FORGET_FORUM_THREAD, leaderboard)


async def boards_without_post(pool: asyncpg.Pool):
    return await pool.fetch(BOARDS_WITHOUT_POST)


async def user_names(pool: asyncpg.Pool) -> dict[str, str]:
    return {row["user_id"]: row["user_name"] for row in await pool.fetch(USER_NAMES)}


async def user(pool: asyncpg.Pool, user_id: str):
    return await pool.fetchrow(USER, user_id)


async def active_boards(pool: asyncpg.Pool) -> list[str]:
    return [row["name"] for row in await pool.fetch(ACTIVE_BOARDS)]


async def score_of(pool: asyncpg.Pool, submission_id: int, gpu: str) -> float | None:
    return await pool.fetchval(BOARD_SCORE, submission_id, gpu)


async def earlier_scores(pool: asyncpg.Pool, leaderboard_id: int, gpu: str, user_id: str, submission_id: int) -> int:
    return await pool.fetchval(EARLIER_SCORES, leaderboard_id, gpu, user_id, submission_id)


async def recent_submissions(pool: asyncpg.Pool, user_id: str, leaderboard_id: int, since: datetime,
                             category: str) -> tuple[datetime, ...]:
    rows = await pool.fetch(RECENT_SUBMISSIONS, user_id, leaderboard_id, since, category)
    return tuple(row["submitted_at"] for row in rows)


async def round_trip(pool: asyncpg.Pool) -> str:
    """A write and a read inside a rolled-back transaction: proves the database accepts both."""
    async with pool.acquire() as conn:
        tx = conn.transaction()
        await tx.start()
        try:
            await conn.execute("CREATE TEMP TABLE discord_verifydb (value TEXT) ON COMMIT DROP")
            await conn.execute("INSERT INTO discord_verifydb VALUES ($1)", "kernelbot")
            return await conn.fetchval("SELECT value FROM discord_verifydb")
        finally:
            await tx.rollback()
