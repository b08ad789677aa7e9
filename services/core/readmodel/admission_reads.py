"""The admission facts every front end reads before it judges a submission: one read-model query, one board view,
one map from a mode to its rate-limit category (the policy's own, services/core/admission/policy.py)."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from services.core.admission import policy

# What admission (docs/http-api.md "Submitting") reads, in one round trip: intake, the board (NULL columns when there is none),
# whether the caller holds an invite to it, and its limit for the category.
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


async def admission(pool: asyncpg.Pool, leaderboard: str, user_id: str, category: str):
    return await pool.fetchrow(ADMISSION, leaderboard, user_id, category)


async def recent_submissions(pool: asyncpg.Pool, user_id: str, leaderboard_id: int, modes: tuple[str, ...],
                             since) -> tuple:
    return tuple(row["submitted_at"] for row in await pool.fetch(RECENT_SUBMISSIONS, user_id, leaderboard_id,
                                                                  list(modes), since))


def board_view(row) -> policy.LeaderboardView:
    """What the shared admission rules need to know of a leaderboard row."""
    return policy.LeaderboardView(name=row["name"], gpus=tuple(row["gpus"]), deadline=row["deadline"],
                                  lang=row["task"].get("lang", "py"), visibility=row["visibility"],
                                  benchmarks=len(row["task"].get("benchmarks") or ()))


def category_modes(category: str) -> tuple[str, ...]:
    """The modes whose submissions count against one rate-limit category (the inverse of policy.rate_category)."""
    return tuple(mode for mode in policy.USER_MODES if policy.rate_category(mode) == category)


async def admission_facts(pool, leaderboard: str, user_id: str, mode: str, now: datetime):
    """What the policy needs from the read model, for every front end: the admission row (board, intake, invite),
    the board's view (None when unknown) and the caller's rate limit in the mode's category (None when unlimited)."""
    category = policy.rate_category(mode.lower())
    found = await admission(pool, leaderboard, user_id, category)
    board = board_view(found) if found["id"] is not None else None
    rate_limit = None
    if board is not None and found["rate_max"] is not None:
        recent = await recent_submissions(pool, user_id, found["id"], category_modes(category),
                                          now - policy.RATE_WINDOW)
        rate_limit = policy.RateLimit(found["rate_max"], recent)
    return found, board, rate_limit
