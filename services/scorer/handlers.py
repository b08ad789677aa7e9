"""The scorer's consumers: collect run verdicts, and judge a submission once all its runs have ended."""

from __future__ import annotations

from dataclasses import dataclass

from faststream.nats import NatsRouter

from schemas.envelope import Event
from schemas.events import (
    LeaderboardDeleted,
    LeaderboardRankChanged,
    RankEntry,
    RunCompleted,
    RunFailed,
    ScoreComputed,
    ScoreRejected,
    SubmissionAccepted,
    SubmissionDeleted,
    SubmissionFinished,
)
from schemas.operations_events import RejudgeCompleted, RejudgeRequested, RerunPlanned, ScoreRevised
from schemas.precheck_events import PrecheckCleared, ScoreHeld, SubmissionReinstated
from services.kit.bus import document_publishers
from services.kit.consumer import KitSlot
from services.kit.deadletter import current_message
from services.kit.runtime import durable_consumer
from services.scorer import best, best_repository, holds, rejudge, repository, scoring
from services.scorer.floor import FloorRules
from services.scorer.own_scores import OwnScores
from services.scorer.settings import ScorerSettings


@dataclass(frozen=True)
class ScorerConfig:
    """What the scorer's handlers take from its settings (set by its app at start)."""

    same_hardware: bool  # ScorerSettings.same_hardware
    development_mode: bool = False  # ScorerSettings.development_mode
    floor: FloorRules = FloorRules()  # ScorerSettings.floor_best_fraction, floor_sibling_ratio


router = NatsRouter()
# None until a scorer starts: an operator's replay (no scorer running) reads the environment instead.
kit: KitSlot[ScorerConfig | None] = KitSlot(None)
own_scores = OwnScores()


def _same_hardware() -> bool:
    """The deployment's choice: the running scorer's, or, where no scorer runs (an operator's replay), the
    environment's, so a replay judges as the live scorer did."""
    return kit.config.same_hardware if kit.config is not None else ScorerSettings().same_hardware


def _development() -> bool:
    """Whether runs that were not fully isolated may rank: the running scorer's setting, else (a replay) the
    environment's, as for `_same_hardware`."""
    return kit.config.development_mode if kit.config is not None else ScorerSettings().development_mode


def _floor_rules() -> FloorRules:
    """The floor's settings, the running scorer's or (a replay) the environment's, as for `_same_hardware`."""
    return kit.config.floor if kit.config is not None else ScorerSettings().floor_rules()


document_publishers(router, "scorer", (ScoreComputed, ScoreRejected, ScoreHeld, LeaderboardRankChanged,
                                       SubmissionFinished,
                                       ScoreRevised, RejudgeCompleted, SubmissionReinstated, RejudgeRequested))


async def judge_if_complete(conn, submission_id: int, found=None) -> list[Event]:
    """Judge the submission once every planned run has its verdict; `found`: its submission_and_verdicts, when the
    caller has read them."""
    found = found or await repository.submission_and_verdicts(conn, submission_id)
    if found is None:
        return []  # the acceptance has not arrived yet; it judges when it does
    row, planned, verdicts = found
    if row["finished"]:
        return []
    if any(run.run_id not in verdicts for run in planned):
        return []
    decision = scoring.decide(row["mode"], planned, verdicts)
    await repository.mark_finished(conn, submission_id)
    tags = {"correlation_id": str(submission_id)}
    if row["precheck_hold"] == "hacked":
        # held by the source pre-check: it ran, so an admin can judge it, but it never ranks (docs/operations.md)
        return [SubmissionFinished(submission_id=submission_id, status="hacked", error=row["precheck_detail"],
                                   **tags)]
    references = {score.gpu: await repository.reference_hardware(conn, row["leaderboard"], score.gpu,
                                                                  score.hardware, submission_id)
                  for score in decision.scores}
    if _same_hardware():
        decision = scoring.hold_back(decision, references)
    held = await holds.review(conn, row["leaderboard"], planned, verdicts, decision, _floor_rules())
    if held:  # no score of it ranks until an admin clears the hold (holds.py)
        events, error = await holds.hold(conn, row, decision, held, tags)
        events += [ScoreRejected(submission_id=submission_id, leaderboard=row["leaderboard"], gpu=rejection.gpu,
                                 reason=rejection.reason, **tags) for rejection in decision.rejections]
        return [*events, SubmissionFinished(submission_id=submission_id, status=decision.status, error=error,
                                            **tags)]
    events: list[Event] = []
    for score in decision.scores:
        computed = ScoreComputed(
            submission_id=submission_id, leaderboard=row["leaderboard"], gpu=score.gpu, user_id=row["user_id"],
            user_name=row["user_name"], run_id=score.run_id, score=score.score, secret_score=score.secret_score,
            ranking_by=row["ranking_by"], harness_version=score.harness_version, submitted_at=row["submitted_at"],
            hardware=score.hardware, **tags,
        )
        events.append(computed)
        events.extend(await best.scored(conn, computed, _scored(row)))
    for rejection in decision.rejections:
        events.append(ScoreRejected(submission_id=submission_id, leaderboard=row["leaderboard"], gpu=rejection.gpu,
                                    reason=rejection.reason, **tags))
    events.append(SubmissionFinished(submission_id=submission_id, status=decision.status, error=decision.error,
                                     **tags))
    return events


def _scored(row) -> best.MakeChange:
    def change(board: str, gpu: str, top: list[RankEntry], previous: list[RankEntry]) -> LeaderboardRankChanged:
        return LeaderboardRankChanged(leaderboard=board, gpu=gpu, top=top, previous_top=previous,
                                      caused_by_submission=row["submission_id"],
                                      correlation_id=str(row["submission_id"]))
    return change


async def apply_accepted(conn, event: SubmissionAccepted) -> list[Event]:
    await repository.lock_submission(conn, event.submission_id)
    await repository.add_submission(conn, event)
    if event.imported:
        # judged upstream: its scores arrive as ScoreComputed events of their own (apply_score_computed), which
        # may have come first and waited for this row to stand on the board
        await repository.mark_finished(conn, event.submission_id)
        await best_repository.refresh(conn, await best_repository.submission_keys(conn, event.submission_id))
        return []
    if await repository.take_early_clear(conn, event.submission_id):
        await repository.set_hold(conn, event.submission_id, None)
    return await judge_if_complete(conn, event.submission_id)


async def apply_run_completed(conn, event: RunCompleted) -> list[Event]:
    await repository.lock_submission(conn, event.submission_id)
    verdict = scoring.verdict_of(event.result, event.mode, event.ranking_by, _development())
    if not await repository.add_verdict(conn, event.run_id, event.submission_id, event.gpu, event.mode,
                                        event.secret, verdict):
        return []  # this run was already judged: a duplicate report counts once
    return await _judge_with_reruns(conn, event.submission_id)


async def apply_run_failed(conn, event: RunFailed) -> list[Event]:
    await repository.lock_submission(conn, event.submission_id)
    verdict = scoring.failed_run_verdict(event.reason, event.detail)
    if not await repository.add_verdict(conn, event.run_id, event.submission_id, event.gpu, "", False, verdict):
        return []
    return await _judge_with_reruns(conn, event.submission_id)


async def _judge_with_reruns(conn, submission_id: int) -> list[Event]:
    """A run's verdict judges its submission when it was the last one, and any open rerun of it that it completes
    (without a rerun open, and there rarely is one, no read of the reruns: a submission not accepted yet has none
    that could be judged)."""
    found = await repository.submission_and_verdicts(conn, submission_id)
    judged = await judge_if_complete(conn, submission_id, found)
    if found is None or not found[0]["reruns_open"]:
        return judged
    return judged + await rejudge.judge_reruns(conn, submission_id, _same_hardware())


async def apply_precheck_cleared(conn, event: PrecheckCleared) -> list[Event]:
    """An admin cleared a false positive: a submission still running is judged as any other; a finished one is
    reinstated with the status its runs earned and, when ranked, put on the board by a rescore (the rejudge path,
    so the change is recorded as ScoreRevised and RejudgeCompleted like any other)."""
    await repository.lock_submission(conn, event.submission_id)
    found = await repository.submission(conn, event.submission_id)
    if found is None:  # its acceptance has not reached the scorer yet: lifted when it does
        await repository.remember_clear(conn, event.submission_id, event.change_id)
        return []
    if found[0]["precheck_hold"] == holds.HELD:  # held by the floor: ranked by a rescore once cleared
        await repository.set_hold(conn, event.submission_id, "cleared")
        return [holds.clear(found[0], event)]
    if found[0]["precheck_hold"] != "hacked":
        return []  # not held (never, or cleared already): nothing to lift
    row, planned = found
    if not row["finished"]:
        await repository.set_hold(conn, event.submission_id, None)
        return []
    decision = scoring.decide(row["mode"], planned, await repository.verdicts(conn, event.submission_id))
    ranked = row["mode"] == "leaderboard"
    await repository.set_hold(conn, event.submission_id, "cleared" if ranked else None)
    rejudge_id = f"{row['leaderboard']}.precheck-clear.{event.submission_id}.{event.change_id}"
    tags = {"correlation_id": str(event.submission_id), "causation_id": event.event_id}
    events: list[Event] = [SubmissionReinstated(submission_id=event.submission_id, status=decision.status,
                                                error=decision.error, rejudge_id=rejudge_id, **tags)]
    if ranked:
        events.append(RejudgeRequested(rejudge_id=rejudge_id, leaderboard=row["leaderboard"], action="rescore",
                                       ranking_by=row["ranking_by"], requested_by=event.cleared_by,
                                       reason=f"pre-check cleared for submission {event.submission_id}: "
                                              f"{event.reason}".rstrip(": "), **tags))
    return events


async def apply_score_computed(conn, event: ScoreComputed) -> list[Event]:
    """Every published score joins the best table, so that the next rank change is measured against it: an imported
    history's scores (`kernelbot import-upstream`) arrive only this way; the scorer's own are there already (recording
    keeps the first, and then nothing moves). A score only adds, so this costs the same whatever the user's history
    (best_repository.improve). History announces nothing: no rank change is emitted."""
    await repository.lock_submission(conn, event.submission_id)  # in turn with its acceptance (apply_accepted)
    await best_repository.improve(conn, event)
    return []


async def apply_rejudge(conn, event: RejudgeRequested) -> list[Event]:
    if event.action != "rescore":
        return []  # a rerun is judged run by run, as its runs end
    return await rejudge.rescore(conn, event, _development())


async def apply_rerun_planned(conn, event: RerunPlanned) -> list[Event]:
    await repository.lock_submission(conn, event.submission_id)
    await repository.add_rerun(conn, event.rejudge_id, event.submission_id, [r.model_dump() for r in event.runs])
    return await rejudge.judge_reruns(conn, event.submission_id, _same_hardware())


# What the scorer's state is built from, in stream order; a replay applies these and keeps what they emit unsent.
APPLIERS = {
    SubmissionAccepted: apply_accepted,
    RunCompleted: apply_run_completed,
    RunFailed: apply_run_failed,
    RejudgeRequested: apply_rejudge,
    RerunPlanned: apply_rerun_planned,
    PrecheckCleared: apply_precheck_cleared,
    ScoreComputed: apply_score_computed,
    SubmissionDeleted: best.submission_deleted,
    LeaderboardDeleted: best.leaderboard_deleted,
}
# The durable consumer applying each of them (its tracking rows say what it has applied).
CONSUMERS = {
    SubmissionAccepted: "scorer-accepted",
    RunCompleted: "scorer-run-completed",
    RunFailed: "scorer-run-failed",
    RejudgeRequested: "scorer-rejudge",
    RerunPlanned: "scorer-rerun-planned",
    PrecheckCleared: "scorer-precheck-cleared",
    ScoreComputed: "scorer-scores",
    SubmissionDeleted: "scorer-submission-deleted",
    LeaderboardDeleted: "scorer-leaderboard-deleted",
}


async def judging(apply) -> None:
    """Apply the message being handled once; the scores it publishes are remembered as this scorer's own."""
    running = kit()

    async def kept(conn) -> list[Event]:
        events = await apply(conn)
        # before the commit: its score comes back as soon as it is published, often before the commit returns. A
        # transaction that then fails publishes nothing; the try that commits publishes the same ids and keeps them.
        own_scores.publishing(running, events)
        return events

    await running.handle(kept)


@router.subscriber("evt.submission.accepted", **durable_consumer(CONSUMERS[SubmissionAccepted]),
                   title=CONSUMERS[SubmissionAccepted])
async def on_accepted(event: SubmissionAccepted) -> None:
    await judging(lambda conn: apply_accepted(conn, event))


@router.subscriber("evt.run.completed", **durable_consumer(CONSUMERS[RunCompleted]), title=CONSUMERS[RunCompleted])
async def on_run_completed(event: RunCompleted) -> None:
    await judging(lambda conn: apply_run_completed(conn, event))


@router.subscriber("evt.run.failed", **durable_consumer(CONSUMERS[RunFailed]), title=CONSUMERS[RunFailed])
async def on_run_failed(event: RunFailed) -> None:
    await judging(lambda conn: apply_run_failed(conn, event))


# A rescore reads a whole board in one transaction: it may take longer than a run's verdict.
@router.subscriber("evt.rejudge.requested",
                   **durable_consumer(CONSUMERS[RejudgeRequested], ack_wait_s=300.0, workers=1),
                   title=CONSUMERS[RejudgeRequested])
async def on_rejudge(event: RejudgeRequested) -> None:
    await judging(lambda conn: apply_rejudge(conn, event))


@router.subscriber("evt.rejudge.rerun_planned", **durable_consumer(CONSUMERS[RerunPlanned]),
                   title=CONSUMERS[RerunPlanned])
async def on_rerun_planned(event: RerunPlanned) -> None:
    await judging(lambda conn: apply_rerun_planned(conn, event))


@router.subscriber("evt.precheck.cleared", **durable_consumer(CONSUMERS[PrecheckCleared]),
                   title=CONSUMERS[PrecheckCleared])
async def on_precheck_cleared(event: PrecheckCleared) -> None:
    await judging(lambda conn: apply_precheck_cleared(conn, event))


@router.subscriber("evt.score.computed", **durable_consumer(CONSUMERS[ScoreComputed]), title=CONSUMERS[ScoreComputed])
async def on_score_computed(event: ScoreComputed) -> None:
    if own_scores.came_back(kit(), event):  # kept by the judging that published it (own_scores.py)
        await current_message().ack()
        return
    await kit().handle(lambda conn: apply_score_computed(conn, event))


# A deletion waits for a rescore of its board (it locks the best table): give it a rescore's time.
@router.subscriber("evt.submission.deleted",
                   **durable_consumer(CONSUMERS[SubmissionDeleted], ack_wait_s=300.0, workers=4),
                   title=CONSUMERS[SubmissionDeleted])
async def on_submission_deleted(event: SubmissionDeleted) -> None:
    await kit().handle(lambda conn: best.submission_deleted(conn, event))


@router.subscriber("evt.leaderboard.deleted",
                   **durable_consumer(CONSUMERS[LeaderboardDeleted], ack_wait_s=300.0, workers=1),
                   title=CONSUMERS[LeaderboardDeleted])
async def on_leaderboard_deleted(event: LeaderboardDeleted) -> None:
    await kit().handle(lambda conn: best.leaderboard_deleted(conn, event))
