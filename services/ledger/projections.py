"""Pure projection logic: which statement rows a batch of events becomes. No I/O here.

A batch is planned as one list of parameter rows per statement, applied in a fixed order of statements (boards and
users, then submissions, jobs, runs, scores). Status updates only move a row forward in its lifecycle, so the result
does not depend on the order events of different kinds had inside the batch; events that change a leaderboard
itself are planned alone, in stream order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from schemas.auth_events import OAuthUserRegistered
from schemas.envelope import Event
from schemas.events import (
    CliUserRegistered,
    LeaderboardCreated,
    LeaderboardDeleted,
    LeaderboardRankChanged,
    LeaderboardUpdated,
    RunCompleted,
    RunDispatched,
    RunFailed,
    RunProgress,
    RunRequested,
    RunStarted,
    ScoreComputed,
    SubmissionAccepted,
    SubmissionDeleted,
    SubmissionFinished,
    SubmissionReceived,
    SubmissionRejected,
)
from schemas.policy_events import (
    IntakePaused,
    IntakeResumed,
    InviteClaimed,
    InvitesCreated,
    InviteRevoked,
    LeaderboardVisibilityChanged,
    RateLimitCleared,
    RateLimitSet,
    UserBanned,
    UserUnbanned,
)
from schemas.operations_events import ScoreRevised

# The order statements are applied in; each name is a statement of the ledger's repository.
STATEMENT_ORDER = (
    "archive", "leaderboard_create", "leaderboard_update", "leaderboard_purge", "leaderboard_delete",
    "user_upsert", "user_provider",
    "intake_set", "user_ban", "visibility_set", "rate_limit_put", "invite_create", "invite_claim", "invite_revoke",
    "submission_insert", "submission_delete", "notify_submission", "job_set", "submission_status",
    "run_request_insert", "run_request_status", "run_request_outcome", "job_running", "job_heartbeat",
    "stage_insert", "score_insert", "run_score", "secret_run_score", "score_revise", "rank_change",
)
BOARD_EVENTS = (LeaderboardCreated, LeaderboardUpdated, LeaderboardDeleted)


@dataclass
class Plan:
    rows: dict[str, list[tuple]] = field(default_factory=dict)
    # standings to recompute once the plan's statements ran: (seq, board, gpu, user) and (seq, submission id)
    touched_users: list[tuple[int, str, str, str]] = field(default_factory=list)
    touched_submissions: list[tuple[int, int]] = field(default_factory=list)

    def add(self, statement: str, *row: object) -> None:
        self.rows.setdefault(statement, []).append(row)

    def touches_standings(self) -> bool:
        return bool(self.touched_users or self.touched_submissions)

    def steps(self) -> list[tuple[str, list[tuple]]]:
        return [(name, self.rows[name]) for name in STATEMENT_ORDER if name in self.rows]


def _parse_ts(value: str | None) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _stage_rows(seq: int, event: RunCompleted) -> Iterable[tuple]:
    """One row per harness stage of a completed run, in the order the stages ran."""
    result = event.result
    for stage, evaluation in result.runs.items():
        run = evaluation.run
        yield (
            event.run_id, stage, event.submission_id, event.gpu, event.secret,
            bool(run and run.success and run.passed), evaluation.model_dump(mode="json"),
            result.system.model_dump(mode="json"), run.result.get("harness-version", "") if run else "",
            _parse_ts(evaluation.start), _parse_ts(evaluation.end), seq,
        )


def _plan_event(plan: Plan, seq: int, event: Event) -> None:  # noqa: C901 - one branch per event type
    match event:
        case LeaderboardCreated():
            plan.add("leaderboard_create", event.name, event.description, event.task.model_dump(mode="json"),
                     event.task_hash, event.templates, event.gpus, event.deadline, event.secret_seed,
                     event.visibility, event.task.ranking_by, event.creator_id, event.forum_id, event.occurred_at)
        case LeaderboardUpdated():
            plan.add("leaderboard_update", event.name, event.description, event.task.model_dump(mode="json"),
                     event.task_hash, event.templates, event.deadline, event.task.ranking_by)
        case LeaderboardDeleted():
            plan.add("leaderboard_purge", event.name)  # its submissions and scores leave every view with it
            plan.add("leaderboard_delete", event.name)
        case IntakePaused() | IntakeResumed():
            plan.add("intake_set", isinstance(event, IntakeResumed), event.occurred_at)
        case UserBanned() | UserUnbanned():
            plan.add("user_ban", event.user_id, isinstance(event, UserBanned))
        case LeaderboardVisibilityChanged():
            plan.add("visibility_set", event.leaderboard, event.visibility)
        case RateLimitSet():
            plan.add("rate_limit_put", event.leaderboard, event.mode_category, event.max_submissions_per_hour)
        case RateLimitCleared():
            plan.add("rate_limit_put", event.leaderboard, event.mode_category, None)
        case InvitesCreated():
            for code in event.codes:
                plan.add("invite_create", code, event.leaderboards, event.occurred_at)
        case InviteClaimed():
            plan.add("invite_claim", event.code, event.user_id, event.user_name, event.occurred_at)
        case InviteRevoked():
            plan.add("invite_revoke", event.code)
        case CliUserRegistered():
            plan.add("user_upsert", event.user_id, event.user_name, event.cli_id, event.web_auth_id)
        case OAuthUserRegistered():
            plan.add("user_upsert", event.user_id, event.user_name, event.cli_id, None)
            plan.add("user_provider", event.user_id, event.provider)
        case SubmissionReceived():
            plan.add("submission_insert", event.submission_id, event.leaderboard, event.user_id, event.user_name,
                     event.file_name, event.code, event.mode, event.gpus, event.occurred_at)
            plan.add("job_set", event.submission_id, "initial", None)
            plan.add("notify_submission", str(event.submission_id))
        case SubmissionAccepted():
            plan.add("job_set", event.submission_id, "pending", None)
            plan.add("submission_status", event.submission_id, "accepted", False)
        case SubmissionRejected():
            plan.add("job_set", event.submission_id, "failed", event.reason)
            plan.add("submission_status", event.submission_id, "rejected", True)
            plan.add("notify_submission", str(event.submission_id))
        case SubmissionFinished():
            plan.add("job_set", event.submission_id, event.status, event.error)
            plan.add("submission_status", event.submission_id, event.status, True)
            if event.status == "hacked":  # hacked submissions never rank
                plan.touched_submissions.append((seq, event.submission_id))
        case SubmissionDeleted():
            plan.add("submission_delete", event.submission_id)
            plan.touched_submissions.append((seq, event.submission_id))
            plan.add("notify_submission", str(event.submission_id))  # the deleting gateway answers once it shows
        case RunRequested():
            plan.add("run_request_insert", event.run_id, event.submission_id, event.gpu, event.mode, event.secret,
                     event.occurred_at)
            # the submitting gateway answers once the acceptance and the queued run show (http-api.md §3.9)
            plan.add("notify_submission", str(event.submission_id))
        case RunDispatched():
            plan.add("run_request_status", event.run_id, "dispatched", event.backend, event.job_ref, None,
                     event.occurred_at, event.submission_id, event.gpu)
        case RunStarted():
            plan.add("run_request_status", event.run_id, "running", None, None, None, event.occurred_at,
                     event.submission_id, event.gpu)
            plan.add("job_running", event.submission_id, event.occurred_at)
        case RunProgress():
            plan.add("job_heartbeat", event.submission_id, event.occurred_at)
        case RunCompleted():
            for row in _stage_rows(seq, event):
                plan.add("stage_insert", *row)
            plan.add("run_request_status", event.run_id, "completed", None, None, None, event.occurred_at,
                     event.submission_id, event.gpu)
            plan.add("run_request_outcome", event.run_id, event.result.success, event.result.error,
                     event.result.system.model_dump(mode="json"))
        case RunFailed():
            plan.add("run_request_status", event.run_id, "failed", None, None, f"{event.reason}: {event.detail}",
                     event.occurred_at, event.submission_id, event.gpu)
        case ScoreComputed():
            plan.add("score_insert", event.submission_id, event.gpu, event.leaderboard, event.user_id, event.score,
                     event.secret_score, event.run_id, event.submitted_at)
            plan.add("run_score", event.run_id, event.score)
            if event.secret_score is not None:  # the secret leaderboard stage shows its score too (http-api.md §3.12)
                plan.add("secret_run_score", event.submission_id, event.gpu, event.secret_score)
            plan.touched_users.append((seq, event.leaderboard, event.gpu, event.user_id))
        case ScoreRevised():
            plan.add("score_revise", event.submission_id, event.gpu, event.leaderboard, event.user_id, event.score,
                     event.secret_score, event.run_id, event.submitted_at)
            plan.touched_users.append((seq, event.leaderboard, event.gpu, event.user_id))
        case LeaderboardRankChanged():
            plan.add("rank_change", seq, event.leaderboard, event.gpu,
                     [e.model_dump(mode="json") for e in event.top], event.occurred_at)


def plan_batch(events: list[tuple[int, Event]]) -> list[Plan]:
    """Plans for a batch of (stream sequence, event), in stream order; board changes get plans of their own."""
    plans: list[Plan] = []
    current = Plan()
    for seq, event in events:
        if isinstance(event, BOARD_EVENTS):
            if current.rows or current.touches_standings():
                plans.append(current)
            alone = Plan()
            _plan_event(alone, seq, event)
            plans.append(alone)
            current = Plan()
            continue
        _plan_event(current, seq, event)
    if current.rows or current.touches_standings():
        plans.append(current)
    return plans


def archive_rows(events: list[tuple[int, Event]]) -> tuple[list, ...]:
    """Columns of the archive insert for a batch (unnest-ready)."""
    return (
        [seq for seq, _ in events],
        [e.event_id for _, e in events],
        [type(e).__name__ for _, e in events],
        [e.subject for _, e in events],
        [e.correlation_id for _, e in events],
        [e.occurred_at for _, e in events],
        [e.model_dump(mode="json") for _, e in events],
    )
