"""The dispatcher's side of `rejudge --rerun`: fresh runs of every ranked submission under the board's task now.

Each submission's runs go through the ordinary run queue and backends; the scorer is told which runs judge it again
(RerunPlanned) and revises its score once they have all ended.
"""

from __future__ import annotations

from faststream.nats import NatsRouter

from schemas.envelope import Event
from schemas.operations_events import RejudgeRequested, RerunPlanned, RerunRun
from services.dispatcher import planning, repository
from services.dispatcher.enqueue import enqueue_runs
from services.dispatcher.handlers import kit
from services.kit.bus import document_publishers
from services.kit.runtime import durable_consumer

router = NatsRouter()
document_publishers(router, "dispatcher", (RerunPlanned,))


async def plan_rerun(conn, request: RejudgeRequested, launch_allowance_s: int) -> list[Event]:
    if request.action != "rerun":
        return []
    board = await repository.board(conn, request.leaderboard)
    if board is None:
        return []
    budget = planning.run_budget_s(board.task, "leaderboard", launch_allowance_s)
    events: list[Event] = []
    for row in await repository.rerun_submissions(conn, board.view.name, request.gpu):
        submission_id = row["submission_id"]
        tags = {"correlation_id": str(submission_id), "causation_id": request.event_id}
        planned = planning.rerun_runs(submission_id, row["gpus"], request.rejudge_id)
        requested = await enqueue_runs(conn, board, submission_id, row["code"], planned, budget, tags)
        runs = [RerunRun(run_id=r.run_id, gpu=r.gpu, mode=r.mode, secret=r.secret) for r in planned]
        # the plan before its runs, so the scorer usually knows what judges the submission before results arrive
        events += [RerunPlanned(rejudge_id=request.rejudge_id, submission_id=submission_id,
                                leaderboard=board.view.name, runs=runs, **tags), *requested]
    return events


@router.subscriber("evt.rejudge.requested", **durable_consumer("dispatcher-rerun", ack_wait_s=300.0, workers=1),
                   title="dispatcher-rerun")
async def on_rejudge_requested(event: RejudgeRequested) -> None:
    allowance = kit.config.launch_allowance_s
    await kit().handle(lambda conn: plan_rerun(conn, event, allowance))
