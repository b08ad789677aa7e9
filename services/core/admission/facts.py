"""The admission facts every front end reads before it judges a submission: one read-model query, one board view,
one map from a mode to its rate-limit category (the policy's own)."""

from __future__ import annotations

from datetime import datetime

from services.core import read_model
from services.core.admission import policy


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
    found = await read_model.admission(pool, leaderboard, user_id, category)
    board = board_view(found) if found["id"] is not None else None
    rate_limit = None
    if board is not None and found["rate_max"] is not None:
        recent = await read_model.recent_submissions(pool, user_id, found["id"], category_modes(category),
                                                     now - policy.RATE_WINDOW)
        rate_limit = policy.RateLimit(found["rate_max"], recent)
    return found, board, rate_limit
