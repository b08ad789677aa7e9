"""Who may see a leaderboard (docs/http-api.md "Public reads"), in one place for every read route. Submitting is judged
by the shared admission policy (services.core.admission.policy)."""

from __future__ import annotations

import asyncpg
from fastapi import HTTPException

from services.core.admission import policy
from services.core.readmodel import board_reads, user_reads
from services.core.readmodel.admission_reads import board_view
from services.gateway.deps import User


async def existing(pool: asyncpg.Pool, name: str):
    """The leaderboard, matched case-insensitively; 404 when there is none."""
    row = await board_reads.leaderboard(pool, name)
    policy.check_leaderboard(name, board_view(row) if row else None)
    return row


async def readable(pool: asyncpg.Pool, name: str, user: User | None):
    """OPT routes: a closed leaderboard needs an identified user holding an invite to it."""
    row = await existing(pool, name)
    await _check_access(pool, row, user)
    return row


async def readable_standings(pool: asyncpg.Pool, name: str, gpu: str, user: User | None):
    """As `readable`, for a ranking of one GPU: the board with its standings' version, in one read."""
    row = await board_reads.board_standing(pool, name, gpu)
    policy.check_leaderboard(name, board_view(row) if row else None)
    await _check_access(pool, row, user)
    return row


async def _check_access(pool: asyncpg.Pool, row, user: User | None) -> None:
    if row["visibility"] != "public":
        if user is None:
            raise HTTPException(401, "Authentication required for closed leaderboard")
        if not await user_reads.has_invite(pool, user.user_id, row["id"]):
            raise HTTPException(403, policy.NO_ACCESS)


def ranked_gpu(row, gpu: str) -> str:
    """The exact GPU name of a ranking, or the 400 that lists the supported ones."""
    policy.check_gpu(board_view(row), gpu)
    return gpu
