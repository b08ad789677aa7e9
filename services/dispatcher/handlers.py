"""The dispatcher's consumer: admission and run planning for every received submission."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from faststream.nats import NatsRouter

from schemas.events import (
    IMPORTED_ORIGIN,
    RunCompleted,
    RunDispatched,
    RunFailed,
    RunProgress,
    RunRequested,
    RunStarted,
    SubmissionAccepted,
    SubmissionReceived,
    SubmissionRejected,
)
from schemas.precheck_events import PrecheckVerdict
from schemas.streams import RUNNER_REPORT_PREFIX, RUNNER_REPORTS
from services.core.admission import policy
from services.core.rules.gpu_peaks import GpuPeak
from services.dispatcher import admission_repository, planning, repository, runner_reports, trace_store
from services.dispatcher.enqueue import enqueue_runs
from services.dispatcher.scheduler import completed_event
from services.kit.bus import document_publishers
from services.kit.consumer import KitSlot
from services.kit.deadletter import current_message
from services.kit.runtime import durable_consumer


@dataclass(frozen=True)
class DispatchConfig:
    """What the dispatcher's handlers take from its settings and GPU catalogue (set by its app at start)."""

    launch_allowance_s: int = 60  # DispatcherSettings.launch_allowance_s
    runners_by_gpu: Mapping[str, Sequence[str]] = field(default_factory=dict)  # who may report runs per GPU
    peaks: Mapping[str, GpuPeak] = field(default_factory=dict)  # the catalogue's own peak figures per GPU


router = NatsRouter()
kit: KitSlot[DispatchConfig] = KitSlot(DispatchConfig())
document_publishers(router, "dispatcher", (SubmissionAccepted, SubmissionRejected, RunRequested, RunDispatched,
                                           RunStarted, RunProgress, RunCompleted, RunFailed))



async def judge(conn, event: SubmissionReceived, board, now: datetime, read: policy.Refusal | list | None = None,
                ) -> tuple[policy.Refusal | None, PrecheckVerdict | None]:
    """The authoritative admission (docs/http-api.md "Submitting"): the shared policy against the policy state and this
    dispatcher's own count of accepted submissions, taken under the category's lock; then the source pre-check
    under the competition's outcomes (docs/operations.md)."""
    category = policy.rate_category(event.mode)
    found = await admission_repository.applicant(conn, event.user_id, board.id if board else None, category)
    rate_limit = None
    if board is not None and found["rate_max"] is not None:
        recent = await admission_repository.accepted_since(conn, event.user_id, board.view.name, category,
                                                           now - policy.RATE_WINDOW)
        rate_limit = policy.RateLimit(found["rate_max"], recent)
    applicant = policy.Applicant(banned=found["banned"], via_cli=event.via_cli, invited=found["invited"])
    refusal = policy.admit(
        leaderboard_name=event.leaderboard, board=board.view if board else None, gpus=event.gpus, mode=event.mode,
        file_name=event.file_name, code=event.code, now=now, accepting=found["accepting"], applicant=applicant,
        rate_limit=rate_limit, deadline_applies=event.deadline_applies, profile=event.profile,
    )
    if refusal is not None:
        return refusal, None
    if isinstance(read, policy.Refusal):
        return read, None  # the source could not be read: never admitted unread
    try:
        verdict = policy.source_precheck(event.code, event.file_name, event.mode, found["precheck_outcomes"],
                                         board.task.multi_gpu, findings=read)
    except policy.Refused as refused:
        return refused.refusal, None
    return policy.precheck_refusal(verdict), verdict


def read_source(event: SubmissionReceived) -> policy.Refusal | list:
    """The pre-check's findings, or why the source could not be read; CPU-bound (a 1 MB file parses for seconds),
    so it runs in a thread before admission's transaction and lock."""
    try:
        return policy.read_source(event.code, event.file_name, event.mode)
    except policy.Refused as refused:
        return refused.refusal


async def admit_and_plan(conn, event: SubmissionReceived, launch_allowance_s: int,
                         read: policy.Refusal | list | None = None):
    board = await repository.board(conn, event.leaderboard)
    # judged at the time the submission was received, so a backlog worked off late is judged as it arrived
    now = event.occurred_at
    refusal, verdict = await judge(conn, event, board, now, read)
    tags = {"correlation_id": str(event.submission_id), "causation_id": event.event_id}
    if refusal is not None:
        return [SubmissionRejected(submission_id=event.submission_id, reason=refusal.detail,
                                   status_code=refusal.status, retry_after_s=refusal.retry_after_s,
                                   precheck=verdict, **tags)]
    await admission_repository.record_accepted(conn, event.submission_id, board.view.name, event.user_id,
                                               policy.rate_category(event.mode), now)
    runs = planning.with_floors(planning.plan_runs(event.submission_id, event.mode, event.gpus), board.task,
                                kit.config.peaks)
    budget = planning.run_budget_s(board.task, event.mode, launch_allowance_s, event.profile)
    requested = await enqueue_runs(conn, board, event.submission_id, event.code, runs, budget, tags,
                                   profile=event.profile)
    accepted = SubmissionAccepted(
        submission_id=event.submission_id, leaderboard=board.view.name, user_id=event.user_id,
        user_name=event.user_name, mode=event.mode, ranking_by=board.ranking_by, submitted_at=event.occurred_at,
        runs=runs, precheck=verdict, **tags,
    )
    return [accepted, *requested]


@router.subscriber("evt.submission.received", **durable_consumer("dispatcher-admit"), title="dispatcher-admit")
async def on_submission_received(event: SubmissionReceived) -> None:
    if event.origin == IMPORTED_ORIGIN:
        return  # it ran on the upstream deployment it was imported from: nothing to admit or run here
    allowance = kit.config.launch_allowance_s
    read = await asyncio.to_thread(read_source, event)
    await kit().handle(lambda conn: admit_and_plan(conn, event, allowance, read))


@router.subscriber(f"{RUNNER_REPORT_PREFIX}.*.run.completed",
                   **durable_consumer("dispatcher-runner-reports", stream=RUNNER_REPORTS),
                   title="dispatcher-runner-reports",
                   description="Results runners publish under their own name; recorded when the run is theirs.")
async def on_runner_report(event: RunCompleted) -> None:
    reporter = runner_reports.reporter_of(current_message().raw_message.subject)
    allowed = kit.config.runners_by_gpu

    async def relay(conn):
        run = await repository.reported_run(conn, event.run_id)
        runner_reports.check_reporter(reporter, event.run_id, run["gpu"] if run else None, allowed)
        if not await repository.mark_finished(conn, event.run_id):
            return []  # already reported, by this runner before or by the backend's own collection
        kept = await trace_store.keep_traces(conn, event.run_id, run["submission_id"], run["gpu"], event.result)
        return [completed_event(event.run_id, run["submission_id"], run["gpu"], run["payload"],
                                run["backend"] or f"runner:{reporter}", kept)]

    await kit().handle(relay)
