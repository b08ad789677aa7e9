"""The scorer's best table kept equal to the ledger's standings, and the rank changes that follow from it.

A computed score improves its user's best when it is better (nothing else can change by adding a score); every event
that can take a score away or make one worse refreshes the (board, GPU, user) keys it touched from the scores the
scorer published and the fate of their submissions (best_repository.py): a score revised, a submission deleted, a
board deleted. The pre-check's hold and its clearing act through scores: a held submission is never scored, a cleared
one is scored by the rescore that reinstates it. A refresh that moves a board's top is a LeaderboardRankChanged: the
podium Discord announces and the ledger's rank_changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import asyncpg

from schemas.envelope import Event
from schemas.events import LeaderboardDeleted, LeaderboardRankChanged, RankEntry, ScoreComputed, SubmissionDeleted
from services.scorer import best_repository, repository, scoring
from services.scorer.best_repository import Key
from services.scorer.scoring import BoardEntry

# (board, gpu, top, previous top) -> the event saying so
MakeChange = Callable[[str, str, list[RankEntry], list[RankEntry]], LeaderboardRankChanged]


def rank_entries(top: list[BoardEntry]) -> list[RankEntry]:
    return [RankEntry(rank=rank, user_id=e.user_id, user_name=e.user_name, score=e.score,
                      submission_id=e.submission_id) for rank, e in scoring.competition_ranks(top)]


async def refresh(conn: asyncpg.Connection, keys: Sequence[Key], make: MakeChange) -> list[Event]:
    """Refresh `keys`; a rank change for each board and GPU whose top that moved."""
    boards = sorted({(board, gpu) for board, gpu, _ in keys})
    before = {board: await repository.top(conn, *board) for board in boards}
    await best_repository.refresh(conn, keys)
    changes: list[Event] = []
    for board, gpu in boards:
        after = await repository.top(conn, board, gpu)
        if after != before[(board, gpu)]:
            changes.append(make(board, gpu, rank_entries(after), rank_entries(before[(board, gpu)])))
    return changes


async def scored(conn: asyncpg.Connection, computed: ScoreComputed, make: MakeChange) -> list[Event]:
    """A new score only adds: it becomes its user's best when it is better, without reading the user's other scores
    (constant cost however long their history); a rank change when the board's top moved."""
    board = (computed.leaderboard, computed.gpu)
    await best_repository.hold(conn, computed)  # the top read here is the one the last judging committed
    before = await repository.top(conn, *board)
    if not await best_repository.improve(conn, computed, held=True):
        return []
    after = await repository.top(conn, *board)
    return [make(*board, rank_entries(after), rank_entries(before))] if after != before else []


async def submission_deleted(conn: asyncpg.Connection, event: SubmissionDeleted) -> list[Event]:
    """The submission leaves every board it stood on; its user's next best takes its place. Its acceptance or its
    runs may still come (separate consumers): it is judged, but never stands."""
    submission_id = event.submission_id
    await repository.lock_submission(conn, submission_id)  # after a judging of it under way, not beside it
    await repository.lock_boards(conn)  # and after a rescore reading the board
    await best_repository.delete_submission(conn, submission_id)

    def change(board: str, gpu: str, top: list[RankEntry], previous: list[RankEntry]) -> LeaderboardRankChanged:
        # named after the deletion: the submission's own scoring already caused a change with its plain identity
        return LeaderboardRankChanged(
            event_id=f"LeaderboardRankChanged:{board}:{gpu}:deleted:{submission_id}", leaderboard=board, gpu=gpu,
            top=top, previous_top=previous, caused_by_submission=submission_id,
            correlation_id=str(submission_id), causation_id=event.event_id)

    return await refresh(conn, await best_repository.submission_keys(conn, submission_id), change)


async def leaderboard_deleted(conn: asyncpg.Connection, event: LeaderboardDeleted) -> list[Event]:
    """Every submission made to the board until now leaves it, whenever its acceptance reaches the scorer. No rank
    change: the board is gone, and there is no podium to announce (the ledger drops its standings as well)."""
    await repository.lock_boards(conn)
    await best_repository.delete_board(conn, event.name, event.occurred_at)
    await best_repository.refresh(conn, await best_repository.board_keys(conn, event.name))
    return []
