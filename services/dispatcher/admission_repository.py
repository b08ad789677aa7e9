"""SQL of the dispatcher's admission: the policy state it enforces (projected by the ledger from the policy events)
and its own record of accepted submissions, which rate limits count."""

from __future__ import annotations

from datetime import datetime

import asyncpg

# Intake and the applicant in one round trip; `invited` only matters for a closed board.
APPLICANT = """
SELECT NOT EXISTS (SELECT 1 FROM intake WHERE NOT accepting) AS accepting,
       COALESCE((SELECT banned FROM users WHERE user_id = $1), false) AS banned,
       EXISTS (SELECT 1 FROM invites WHERE user_id = $1 AND $2::integer = ANY(leaderboard_ids)) AS invited,
       (SELECT max_submissions_per_hour FROM rate_limits WHERE leaderboard_id = $2 AND mode_category = $3)
           AS rate_max,
       COALESCE((SELECT outcomes FROM precheck_policies WHERE leaderboard_id = $2), '{}'::jsonb) AS precheck_outcomes
"""
# Held to the end of the admitting transaction: the count and the acceptance are one decision per
# (user, leaderboard, category), whatever the number of dispatcher workers and replicas.
LOCK_CATEGORY = "SELECT pg_advisory_xact_lock(hashtextextended($1, 4))"
ACCEPTED_SINCE = """
SELECT accepted_at FROM admission_accepted
WHERE user_id = $1 AND lower(leaderboard) = lower($2) AND category = $3 AND accepted_at > $4
"""
RECORD_ACCEPTED = """
INSERT INTO admission_accepted (submission_id, leaderboard, user_id, category, accepted_at)
VALUES ($1, $2, $3, $4, $5) ON CONFLICT (submission_id) DO NOTHING
"""


async def applicant(conn: asyncpg.Connection, user_id: str, leaderboard_id: int | None, category: str):
    return await conn.fetchrow(APPLICANT, user_id, leaderboard_id, category)


async def accepted_since(conn: asyncpg.Connection, user_id: str, leaderboard: str, category: str,
                         since: datetime) -> tuple[datetime, ...]:
    """Locks the category for this transaction, then reads its accepted submissions since `since`."""
    await conn.execute(LOCK_CATEGORY, f"{user_id}\x1f{leaderboard.lower()}\x1f{category}")
    return tuple(row["accepted_at"] for row in await conn.fetch(ACCEPTED_SINCE, user_id, leaderboard, category,
                                                                since))


async def record_accepted(conn: asyncpg.Connection, submission_id: int, leaderboard: str, user_id: str,
                          category: str, at: datetime) -> None:
    await conn.execute(RECORD_ACCEPTED, submission_id, leaderboard, user_id, category, at)
