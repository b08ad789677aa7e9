"""The event catalogue (docs/architecture.md "The event catalogue"). One type per subject; subjects are
evt.<entity>.<past_verb>."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from schemas.contracts import FullResult, Mode, ProfileOptions, Task, UserMode
from schemas.credentials import read_clear_id
from schemas.envelope import Event
from schemas.precheck_events import PrecheckVerdict

Visibility = Literal["public", "closed"]
JobStatus = Literal["succeeded", "failed", "timed_out", "hacked"]


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


# --- leaderboards -------------------------------------------------------------------------------------------

# Practice boards' ids start here (migrations/0106_board_ids.sql): far above any id an upstream deployment's serial
# reaches, so an import finds its ids free.
FIRST_PRACTICE_BOARD_ID = 1_000_000_000


class LeaderboardCreated(Event):
    subject = "evt.leaderboard.created"
    name: str
    description: str = ""
    task: Task
    task_hash: str = ""
    templates: dict[str, str] = {}
    gpus: list[str]
    deadline: datetime
    visibility: Visibility = "public"
    secret_seed: int
    creator_id: int = 0
    forum_id: int = -1
    # The board's id, where it must be this one: an import keeps upstream's (links such as /leaderboard/N). Without
    # it the ledger numbers the board, from a range of practice ids for a practice board (bundled examples, dev and
    # scratch boards), so that those never take an id an import needs.
    board_id: int | None = Field(default=None, ge=1, lt=FIRST_PRACTICE_BOARD_ID)
    practice: bool = False

    def identity(self) -> str:
        return f"{self.name}:{self.task_hash}"


class LeaderboardUpdated(Event):
    subject = "evt.leaderboard.updated"
    name: str
    description: str = ""
    task: Task
    task_hash: str = ""
    templates: dict[str, str] = {}
    deadline: datetime

    def identity(self) -> str:
        content = f"{self.task_hash}|{self.deadline.isoformat()}|{self.description}|{sorted(self.templates.items())}"
        return f"{self.name}:{hashlib.sha256(content.encode()).hexdigest()[:16]}"


class LeaderboardDeleted(Event):
    subject = "evt.leaderboard.deleted"
    name: str
    task_hash: str = ""
    force: bool = False

    def identity(self) -> str:
        # the board's own identity: deleting it once more, after a retry, is the same fact
        return f"{self.name}:{self.task_hash}"


# --- people ---------------------------------------------------------------------------------------------------


class CliUserRegistered(Event):
    """A user was provisioned (admin route, `kernelbot up`) or given a new CLI id (`kernelbot users rotate-cli-id`).

    The CLI id travels only as `cli_id_sha256`, a web id as `web_auth_id_sha256` (schemas/credentials.py); events
    recorded before that carry `cli_id` and `web_auth_id` in clear and are read as if they had carried the digests.
    """

    subject = "evt.user.registered"
    user_id: str
    user_name: str
    cli_id_sha256: str
    web_auth_id_sha256: str | None = None  # the digest of the user's web id (X-Web-Auth-Id), when one is set

    @model_validator(mode="before")
    @classmethod
    def _hash_clear_id(cls, data: object) -> object:
        return read_clear_id(data)

    def identity(self) -> str:
        return f"{self.user_id}:{self.cli_id_sha256}"


class UserRenamed(Event):
    """An admin set the name shown for a user, on every view of their submissions too (upstream KernelBot's
    `/admin update-user-names`)."""

    subject = "evt.user.renamed"
    user_id: str
    user_name: str
    change_id: str

    def identity(self) -> str:
        return f"{self.user_id}:{self.change_id}"


# --- submissions ----------------------------------------------------------------------------------------------


# The origin of a submission `kernelbot import-upstream` brought from an upstream deployment: it ran there, so the
# dispatcher admits and plans nothing for it (docs/operations.md, "Switching from upstream: import").
IMPORTED_ORIGIN = "upstream-import"


class SubmissionReceived(Event):
    subject = "evt.submission.received"
    submission_id: int
    leaderboard: str
    gpus: list[str]
    mode: UserMode
    user_id: str
    user_name: str
    file_name: str
    code: str
    origin: str = "http"
    # docs/http-api.md "Submitting": a closed leaderboard admits only popcorn-cli identities; the admin route skips the
    # deadline
    via_cli: bool = False
    deadline_applies: bool = True
    profile: ProfileOptions | None = None  # a profile submission's capture options

    def identity(self) -> str:
        return str(self.submission_id)


class PlannedRun(_Part):
    run_id: str
    gpu: str
    mode: Mode
    secret: bool = False
    # A ranked public run's roofline floor per benchmark case, in ns (the task's declaration over the GPU's peaks,
    # services/core/rules/gpu_peaks.py); empty where the task declares none or the GPU's peaks are unknown.
    floor_ns: list[float] = []


class SubmissionAccepted(Event):
    subject = "evt.submission.accepted"
    submission_id: int
    leaderboard: str
    user_id: str
    user_name: str
    mode: UserMode
    ranking_by: str
    submitted_at: datetime
    runs: list[PlannedRun]
    # the source pre-check's verdict when a rule fired: `hacked` holds the submission off every ranking
    precheck: PrecheckVerdict | None = None
    # judged by an upstream deployment (`kernelbot import-upstream`): its runs, scores and outcome follow as events of
    # their own, so the scorer records it without judging it again
    imported: bool = False

    def identity(self) -> str:
        return str(self.submission_id)


class SubmissionRejected(Event):
    subject = "evt.submission.rejected"
    submission_id: int
    reason: str
    status_code: int = 400
    retry_after_s: int | None = None
    precheck: PrecheckVerdict | None = None  # set when the source pre-check refused it

    def identity(self) -> str:
        return str(self.submission_id)


class SubmissionFinished(Event):
    subject = "evt.submission.finished"
    submission_id: int
    status: JobStatus
    error: str | None = None

    def identity(self) -> str:
        return str(self.submission_id)



class SubmissionDeleted(Event):
    """A submission was withdrawn by its owner or an admin: it and its runs leave every view and ranking.

    A job still pending or running is to be cancelled and any later result of it discarded
    (docs/http-api.md "A user's submissions").
    """

    subject = "evt.submission.deleted"
    submission_id: int
    user_id: str
    by_admin: bool = False

    def identity(self) -> str:
        return str(self.submission_id)


# --- runs -----------------------------------------------------------------------------------------------------


class RunRequested(Event):
    subject = "evt.run.requested"
    run_id: str
    submission_id: int
    leaderboard: str
    gpu: str
    mode: Mode
    secret: bool = False
    timeout_s: int

    def identity(self) -> str:
        return self.run_id


class RunDispatched(Event):
    subject = "evt.run.dispatched"
    run_id: str
    submission_id: int
    gpu: str
    backend: str
    job_ref: str
    attempt: int = 1

    def identity(self) -> str:
        return f"{self.run_id}:{self.attempt}"


class RunStarted(Event):
    subject = "evt.run.started"
    run_id: str
    submission_id: int
    gpu: str
    attempt: int = 1

    def identity(self) -> str:
        return f"{self.run_id}:{self.attempt}"


class RunProgress(Event):
    subject = "evt.run.progress"
    run_id: str
    submission_id: int
    sequence: int
    message: str

    def identity(self) -> str:
        return f"{self.run_id}:{self.sequence}"


class RunCompleted(Event):
    subject = "evt.run.completed"
    run_id: str
    submission_id: int
    leaderboard: str
    gpu: str
    mode: Mode
    secret: bool = False
    ranking_by: str = "last"
    backend: str = "local"
    result: FullResult

    def identity(self) -> str:
        return self.run_id


RunFailureReason = Literal["timeout", "launch_error", "lost", "runner_error", "cancelled"]


class RunFailed(Event):
    """An infrastructure failure: the run produced no result a user's code is to blame for."""

    subject = "evt.run.failed"
    run_id: str
    submission_id: int
    gpu: str
    reason: RunFailureReason
    detail: str = ""
    retryable: bool = False

    def identity(self) -> str:
        return self.run_id


# --- scores ---------------------------------------------------------------------------------------------------


class ScoreComputed(Event):
    subject = "evt.score.computed"
    submission_id: int
    leaderboard: str
    gpu: str
    user_id: str
    user_name: str
    run_id: str
    score: float
    secret_score: float | None = None
    ranking_by: str
    harness_version: str = ""
    submitted_at: datetime
    hardware: dict[str, str] = {}  # the comparable fingerprint it was measured on (docs/authoring.md)

    def identity(self) -> str:
        return f"{self.submission_id}:{self.gpu}"


class ScoreRejected(Event):
    subject = "evt.score.rejected"
    submission_id: int
    leaderboard: str
    gpu: str
    reason: str

    def identity(self) -> str:
        return f"{self.submission_id}:{self.gpu}"


class RankEntry(_Part):
    rank: int
    user_id: str
    user_name: str
    score: float
    submission_id: int


class LeaderboardRankChanged(Event):
    subject = "evt.leaderboard.rank_changed"
    leaderboard: str
    gpu: str
    top: list[RankEntry]
    previous_top: list[RankEntry] = []
    caused_by_submission: int

    def identity(self) -> str:
        return f"{self.leaderboard}:{self.gpu}:{self.caused_by_submission}"


from schemas.auth_events import OAuthUserRegistered, WebAuthIdSet, WebsiteUserSignedIn  # noqa: E402 - its own module, registered here
from schemas.operations_events import OPERATIONS_EVENTS  # noqa: E402 - operator events, own module
from schemas.policy_events import POLICY_EVENTS  # noqa: E402 - policy changes, own module
from schemas.precheck_events import PRECHECK_EVENTS  # noqa: E402 - the source pre-check, own module

CATALOGUE: tuple[type[Event], ...] = (
    LeaderboardCreated,
    LeaderboardUpdated,
    LeaderboardDeleted,
    CliUserRegistered,
    OAuthUserRegistered,
    WebAuthIdSet,
    WebsiteUserSignedIn,
    UserRenamed,
    SubmissionReceived,
    SubmissionAccepted,
    SubmissionRejected,
    SubmissionFinished,
    SubmissionDeleted,
    RunRequested,
    RunDispatched,
    RunStarted,
    RunProgress,
    RunCompleted,
    RunFailed,
    ScoreComputed,
    ScoreRejected,
    LeaderboardRankChanged,
    *OPERATIONS_EVENTS,
    *POLICY_EVENTS,
    *PRECHECK_EVENTS,
)

BY_SUBJECT: dict[str, type[Event]] = {event.subject: event for event in CATALOGUE}
