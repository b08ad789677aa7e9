"""Pure projection logic: how a batch of events is applied, step by step. No I/O here.

A batch is cut into steps: events that change a leaderboard itself are a step alone, in stream order; the events
between them are one step. A step applies a fixed order of statements (boards and users, then submissions, jobs,
runs, scores, standings). The busy events (submissions, runs, scores) are applied by set-based statements that read
them from the archive (archive_sql.py): a step only names their stream sequences. The rare ones (boards, users,
policy, deletions, revisions, renames, pre-check policies and clearings, reinstatements) become parameter rows here.
Status updates only move a row forward in its lifecycle (a reinstatement is the one step back, from `hacked`), so the
result does not depend on the order events of different kinds had inside the step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from schemas.auth_events import OAuthUserRegistered, WebAuthIdSet, WebsiteUserSignedIn
from schemas.envelope import Event
from schemas.events import (
    CliUserRegistered,
    LeaderboardCreated,
    LeaderboardDeleted,
    LeaderboardUpdated,
    SubmissionDeleted,
    UserRenamed,
)
from schemas.operations_events import ScoreRevised
from schemas.policy_events import (
    IntakePaused,
    IntakeResumed,
    InviteClaimed,
    InviteRevoked,
    InvitesCreated,
    LeaderboardVisibilityChanged,
    RateLimitCleared,
    RateLimitSet,
    UserBanned,
    UserUnbanned,
)
from schemas.precheck_events import PrecheckCleared, PrecheckPolicySet, SubmissionReinstated

# The order statements are applied in; each name is a statement of the ledger's repository.
STATEMENT_ORDER = (
    "archive", "leaderboard_create", "leaderboard_update", "leaderboard_purge", "leaderboard_delete",
    "user_upsert", "user_provider", "user_web_id", "user_website",
    "intake_set", "user_ban", "visibility_set", "rate_limit_put", "precheck_policy_put", "invite_create",
    "invite_claim", "invite_revoke", "submission_insert", "submission_delete", "user_rename", "user_rename_submissions",
    "notify_submission", "job_set", "submission_status", "precheck_verdict_insert", "precheck_clear",
    "submission_reinstate",
    "run_request_insert", "run_request_status", "run_request_outcome", "job_running", "job_heartbeat",
    "stage_insert", "score_insert", "run_score", "secret_run_score", "score_revise", "rank_change",
    "standing_refresh", "standing_rename",
)
BOARD_EVENTS = (LeaderboardCreated, LeaderboardUpdated, LeaderboardDeleted)
# The events that become parameter rows here (the rest are read from the archive by archive_sql.py).
PLANNED_EVENTS = (*BOARD_EVENTS, IntakePaused, IntakeResumed, UserBanned, UserUnbanned, LeaderboardVisibilityChanged,
                  RateLimitSet, RateLimitCleared, InvitesCreated, InviteClaimed, InviteRevoked, CliUserRegistered,
                  OAuthUserRegistered, WebAuthIdSet, WebsiteUserSignedIn, SubmissionDeleted, ScoreRevised, UserRenamed,
                  PrecheckPolicySet, PrecheckCleared, SubmissionReinstated)


@dataclass
class Plan:
    rows: dict[str, list[tuple]] = field(default_factory=dict)
    seqs: list[int] = field(default_factory=list)  # every event of the step, in stream order
    types: set[str] = field(default_factory=set)  # their type names

    def add(self, statement: str, *row: object) -> None:
        self.rows.setdefault(statement, []).append(row)

    def include(self, seq: int, event: Event) -> None:
        self.seqs.append(seq)
        self.types.add(type(event).__name__)

    def steps(self) -> list[tuple[str, list[tuple]]]:
        """The statements that have rows, in the order they apply; the archive statements are not among them."""
        return [(name, self.rows[name]) for name in STATEMENT_ORDER if name in self.rows]


def _plan_event(plan: Plan, seq: int, event: Event) -> None:  # noqa: C901 - one branch per event type
    match event:
        case LeaderboardCreated():
            plan.add("leaderboard_create", event.name, event.description, event.task.model_dump(mode="json"),
                     event.task_hash, event.templates, event.gpus, event.deadline, event.secret_seed,
                     event.visibility, event.task.ranking_by, event.creator_id, event.forum_id, event.occurred_at,
                     event.board_id, event.practice)
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
            plan.add("user_upsert", event.user_id, event.user_name, event.cli_id_sha256,
                     event.web_auth_id_sha256)
        case OAuthUserRegistered():
            plan.add("user_upsert", event.user_id, event.user_name, event.cli_id_sha256, None)
            plan.add("user_provider", event.user_id, event.provider)
        case WebAuthIdSet():
            plan.add("user_web_id", event.user_id, event.user_name, event.web_auth_id_sha256)
        case WebsiteUserSignedIn():
            plan.add("user_website", event.user_id, event.user_name)
        case UserRenamed():
            plan.add("user_rename", event.user_id, event.user_name)
            plan.add("user_rename_submissions", event.user_id, event.user_name)
            plan.add("standing_rename", event.user_id, event.user_name, seq)
        case PrecheckPolicySet():
            plan.add("precheck_policy_put", event.leaderboard, event.outcomes)
        case PrecheckCleared():
            plan.add("precheck_clear", event.submission_id, event.cleared_by, event.occurred_at, event.reason)
        case SubmissionReinstated():
            # a hacked submission back to the status its runs earned: standing_refresh ranks its scores again
            plan.add("submission_reinstate", event.submission_id, event.status, event.error)
        case SubmissionDeleted():
            plan.add("submission_delete", event.submission_id)
        case ScoreRevised():
            plan.add("score_revise", event.submission_id, event.gpu, event.leaderboard, event.user_id, event.score,
                     event.secret_score, event.run_id, event.submitted_at, seq)


def plan_batch(events: list[tuple[int, Event]]) -> list[Plan]:
    """Plans for a batch of (stream sequence, event), in stream order; board changes get plans of their own."""
    plans: list[Plan] = []
    current = Plan()
    for seq, event in events:
        if isinstance(event, BOARD_EVENTS):
            if current.seqs:
                plans.append(current)
            alone = Plan()
            alone.include(seq, event)
            _plan_event(alone, seq, event)
            plans.append(alone)
            current = Plan()
            continue
        current.include(seq, event)
        _plan_event(current, seq, event)
    if current.seqs:
        plans.append(current)
    return plans


def plan_step(events: list[tuple[int, Event]], types: set[str]) -> Plan:
    """The rows of one step whose archived events are of `types` and whose planned events are `events` (a replay
    reads only those from the archive); a board change is a step alone."""
    plan = Plan(types=set(types))
    for seq, event in events:
        _plan_event(plan, seq, event)
    return plan


def archive_rows(events: list[tuple[int, Event]]) -> tuple[list, ...]:
    """Columns of the archive insert for a batch (unnest-ready); payloads as JSON text, serialized by pydantic (a
    third of the cost of a dict that the driver would serialize again)."""
    return (
        [seq for seq, _ in events],
        [e.event_id for _, e in events],
        [type(e).__name__ for _, e in events],
        [e.subject for _, e in events],
        [e.correlation_id for _, e in events],
        [e.occurred_at for _, e in events],
        [e.model_dump_json() for _, e in events],
    )


def step_filter(seqs: list[int]) -> list[int] | None:
    """The exact sequences a step's statements filter on; None when they are every sequence from the first to the
    last, which the statements' range already says (`= ANY` of a long array per row is quadratic in the step)."""
    return None if seqs[-1] - seqs[0] + 1 == len(seqs) else seqs
