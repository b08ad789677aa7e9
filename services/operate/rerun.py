"""The dispatcher's side of `rejudge --rerun`: fresh runs of every ranked submission under the board's task now.

Each submission's runs go through the ordinary run queue and backends; the scorer is told which runs judge it again
(RerunPlanned) and revises its score once they have all ended.
"""

from __future__ import annotations

from faststream.nats import NatsRouter

from runner.payload import build_payload
from schemas.envelope import Event
from schemas.events import RunRequested
from schemas.operations_events import RejudgeRequested, RerunPlanned, RerunRun
from services.dispatcher import planning
from services.dispatcher import repository as dispatcher_repository
from services.dispatcher.handlers import LAUNCH_ALLOWANCE_KEY, kit
from services.kit.bus import document_publishers
from services.kit.runtime import durable_consumer
from services.operate import repository

router = NatsRouter()
document_publishers(router, "dispatcher", (RerunPlanned,))
RANKED_RUNS = (("public", "leaderboard", False), ("secret", "private", True))


async def plan_rerun(conn, request: RejudgeRequested, launch_allowance_s: int) -> list[Event]:
    if request.action != "rerun":
        return []
    board = await dispatcher_repository.board(conn, request.leaderboard)
    if board is None:
        return []
    budget = planning.run_budget_s(board.task, "leaderboard", launch_allowance_s)
    events: list[Event] = []
    for row in await repository.rerun_submissions(conn, board.view.name, request.gpu):
        submission_id = row["submission_id"]
        tags = {"correlation_id": str(submission_id), "causation_id": request.event_id}
        runs, requested = [], []
        for gpu in row["gpus"]:
            for kind, mode, secret in RANKED_RUNS:
                run_id = f"{submission_id}.{gpu}.{kind}.{request.rejudge_id}"
                payload = build_payload(board.task, row["code"], run_id=run_id, gpu=gpu, mode=mode, secret=secret,
                                        seed=board.secret_seed if secret else board.task.seed)
                stored = payload.model_dump(mode="json") | {"leaderboard": board.view.name}
                await dispatcher_repository.enqueue(conn, run_id, submission_id, gpu, stored, budget)
                runs.append(RerunRun(run_id=run_id, gpu=gpu, mode=mode, secret=secret))
                requested.append(RunRequested(run_id=run_id, submission_id=submission_id,
                                              leaderboard=board.view.name, gpu=gpu, mode=mode, secret=secret,
                                              timeout_s=budget, **tags))
        # the plan before its runs, so the scorer usually knows what judges the submission before results arrive
        events += [RerunPlanned(rejudge_id=request.rejudge_id, submission_id=submission_id,
                                leaderboard=board.view.name, runs=runs, **tags), *requested]
    return events


@router.subscriber("evt.rejudge.requested", **durable_consumer("dispatcher-rerun", ack_wait_s=300.0, workers=1),
                   title="dispatcher-rerun")
async def on_rejudge_requested(event: RejudgeRequested) -> None:
    allowance = kit().extras.get(LAUNCH_ALLOWANCE_KEY, 60)
    await kit().handle(lambda conn: plan_rerun(conn, event, allowance))
