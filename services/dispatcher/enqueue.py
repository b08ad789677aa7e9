"""The one way runs enter the queue, for a received submission and for a rerun alike."""

from __future__ import annotations

from collections.abc import Sequence

from runner.payload import build_payload
from schemas.events import PlannedRun, RunRequested
from services.dispatcher import repository
from services.dispatcher.planning import StoredRun
from services.dispatcher.repository import Board


async def enqueue_runs(conn, board: Board, submission_id: int, code: str, runs: Sequence[PlannedRun],
                       budget_s: int, tags: dict[str, str]) -> list[RunRequested]:
    """Store each planned run with its payload (the board's task with `code`, the secret seed for secret runs) and
    the leaderboard it counts for; return the RunRequested of each, to publish in the same transaction."""
    requested = []
    for run in runs:
        seed = board.secret_seed if run.secret else board.task.seed
        payload = build_payload(board.task, code, run_id=run.run_id, gpu=run.gpu, mode=run.mode, secret=run.secret,
                                seed=seed)
        stored = StoredRun.model_validate(payload.model_dump() | {"leaderboard": board.view.name})
        await repository.enqueue(conn, run.run_id, submission_id, run.gpu, stored.model_dump(mode="json"), budget_s)
        requested.append(RunRequested(run_id=run.run_id, submission_id=submission_id, leaderboard=board.view.name,
                                      gpu=run.gpu, mode=run.mode, secret=run.secret, timeout_s=budget_s, **tags))
    return requested
