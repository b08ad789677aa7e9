"""Asking for a rejudge, previewing it, and waiting for its outcome."""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg

from schemas.operations_events import RejudgeAction, RejudgeRequested
from services.core.readmodel import operator_reads
from services.scorer import rejudge
from services.scorer.scoring import BoardEntry, competition_ranks
from services.scorer.settings import ScorerSettings


class RejudgeError(Exception):
    pass


@dataclass(frozen=True)
class RankMove:
    user_name: str
    submission_id: int
    before: tuple[int, float] | None  # (rank, score)
    after: tuple[int, float] | None


async def build_request(conn: asyncpg.Connection, leaderboard: str, gpu: str | None, action: RejudgeAction,
                        requested_by: str, reason: str, same_hardware: bool = False) -> RejudgeRequested:
    row = await operator_reads.board(conn, leaderboard)
    if row is None:
        raise RejudgeError(f"Leaderboard `{leaderboard}` does not exist.")
    if gpu is not None and gpu not in row["gpus"]:
        raise RejudgeError(f"GPU `{gpu}` is not one of {row['name']}'s: {', '.join(row['gpus'])}")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    return RejudgeRequested(
        rejudge_id=f"{row['name']}.{action}.{stamp}.{secrets.token_hex(3)}", leaderboard=row["name"], gpu=gpu,
        action=action, ranking_by=row["ranking_by"], task_hash=row["task_hash"], requested_by=requested_by,
        reason=reason, same_hardware=same_hardware, correlation_id="",
    )


def _ranks(entries: list[BoardEntry]) -> dict[str, tuple[int, float, int]]:
    return {e.user_id: (rank, e.score, e.submission_id) for rank, e in competition_ranks(entries)}


def rank_moves(before: list[BoardEntry], after: list[BoardEntry]) -> list[RankMove]:
    """Users whose rank or score changes, best new rank first (users leaving the board last)."""
    old, new = _ranks(before), _ranks(after)
    names = {e.user_id: e.user_name for e in before + after}
    moves = []
    for user in old.keys() | new.keys():
        was, now = old.get(user), new.get(user)
        if was is not None and now is not None and was == now:
            continue
        moves.append(RankMove(names[user], (now or was)[2], was[:2] if was else None, now[:2] if now else None))
    return sorted(moves, key=lambda m: (m.after is None, m.after or (0, 0.0), m.user_name))


class _RollBack(Exception):
    pass


async def preview(conn: asyncpg.Connection, request: RejudgeRequested, gpus: list[str]) -> dict[str, list[RankMove]]:
    """The rank changes a rescore would make, computed by the scorer's own code in a transaction rolled back."""
    moves: dict[str, list[RankMove]] = {}
    try:
        async with conn.transaction():
            before = {gpu: await rejudge.standing(conn, request.leaderboard, gpu) for gpu in gpus}
            await rejudge.rescore(conn, request, ScorerSettings().development_mode)
            for gpu in gpus:
                moves[gpu] = rank_moves(before[gpu], await rejudge.standing(conn, request.leaderboard, gpu))
            raise _RollBack
    except _RollBack:
        pass
    return moves


async def wait_for_completion(conn: asyncpg.Connection, rejudge_id: str, timeout_s: float) -> dict:
    """The RejudgeCompleted the scorer records, once the ledger has it."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        found = await operator_reads.archived(conn, f"RejudgeCompleted:{rejudge_id}")
        if found is not None:
            return found
        if asyncio.get_running_loop().time() > deadline:
            raise RejudgeError(f"rejudge {rejudge_id} was requested but did not complete within {timeout_s:.0f}s; "
                               "is the scorer running? (`kernelbot events tail --type RejudgeCompleted`)")
        await asyncio.sleep(0.2)


async def rerun_candidates(conn: asyncpg.Connection, request: RejudgeRequested) -> int:
    return await operator_reads.ranked_count(conn, request.leaderboard, request.gpu)


async def hardware_spread(conn: asyncpg.Connection, leaderboard: str) -> dict[str, list[dict[str, str]]]:
    return await rejudge.hardware_spread(conn, leaderboard)
