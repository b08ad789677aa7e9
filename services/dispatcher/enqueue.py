"""The one way runs enter the queue, for a received submission and for a rerun alike."""

from __future__ import annotations

from collections.abc import Sequence

from runner.task.payload import build_payload
from schemas.contracts import ProfileOptions
from schemas.events import PlannedRun, RunRequested
from services.dispatcher import repository, seeds
from services.dispatcher.planning import StoredRun
from services.dispatcher.repository import Board


async def enqueue_runs(conn, board: Board, submission_id: int, code: str, runs: Sequence[PlannedRun],
                       budget_s: int, tags: dict[str, str], *, profile: ProfileOptions | None = None,
                       ) -> list[RunRequested]:
    """Store each planned run with its payload (the board's task with `code`; a secret run's own seed, derived from
    the board's seed key and the run id) and the leaderboard it counts for; return the RunRequested of each, to
    publish in the same transaction.

    The run id names the run: a relaunch of the same run reuses its stored payload and seed, and a rerun
    (`rejudge --rerun`) is a new run with a new id, hence a new seed."""
    key = await repository.seed_key(conn, board.id, seeds.new_seed_key()) if any(r.secret for r in runs) else b""
    requested = []
    for run in runs:
        seed = seeds.run_seed(key, run.run_id) if run.secret else board.task.seed
        payload = build_payload(board.task, code, run_id=run.run_id, gpu=run.gpu, mode=run.mode, secret=run.secret,
                                seed=seed, profile=profile if run.mode == "profile" else None)
        stored = StoredRun.model_validate(payload.model_dump() | {"leaderboard": board.view.name})
        await repository.enqueue(conn, run.run_id, submission_id, run.gpu, stored.model_dump(mode="json"), budget_s)
        requested.append(RunRequested(run_id=run.run_id, submission_id=submission_id, leaderboard=board.view.name,
                                      gpu=run.gpu, mode=run.mode, secret=run.secret, timeout_s=budget_s, **tags))
    return requested
