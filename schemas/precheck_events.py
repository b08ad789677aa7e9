"""The source pre-check as events (docs/operations.md): a competition's outcomes per rule, the verdict an admission
carries, an admin clearing a false positive, and the submission reinstated once cleared. The floor's hold of a
score for review (ScoreHeld) is reviewed and cleared the same way, so it lives here too.

The verdict travels inside the admission's own event (SubmissionAccepted / SubmissionRejected), so whoever judges
the submission later (the scorer) knows it was held in the same fact that made the submission exist.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from schemas.envelope import Event

PrecheckOutcome = Literal["refuse", "hacked", "warn"]
RuleOutcome = Literal["refuse", "hacked", "warn", "off"]


class PrecheckFinding(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")
    rule: str
    severity: str
    message: str
    line: int = 0


class PrecheckVerdict(BaseModel):
    """What fired and what it decided: refused at admission, accepted but `hacked` (never ranks), or a warning."""

    model_config = ConfigDict(frozen=True, extra="ignore")
    outcome: PrecheckOutcome
    findings: list[PrecheckFinding]
    detail: str

    @property
    def rules(self) -> list[str]:
        return sorted({finding.rule for finding in self.findings})


class PrecheckPolicySet(Event):
    """A competition's outcome per rule (`off` disables it); rules not named keep their defaults. Replaces an
    earlier setting of the board."""

    subject = "evt.precheck.policy_set"
    leaderboard: str
    outcomes: dict[str, RuleOutcome]
    change_id: str

    def identity(self) -> str:
        return f"{self.leaderboard}:{self.change_id}"


class PrecheckCleared(Event):
    """An admin judged a `hacked` submission a false positive: it may rank, once rescored."""

    subject = "evt.precheck.cleared"
    submission_id: int
    cleared_by: str
    reason: str = ""
    change_id: str

    def identity(self) -> str:
        return f"{self.submission_id}:{self.change_id}"


class SubmissionReinstated(Event):
    """The scorer lifted a cleared submission's hold: its job status is now what its runs earned, and the rescore
    `rejudge_id` puts its scores on the board."""

    subject = "evt.submission.reinstated"
    submission_id: int
    status: Literal["succeeded", "failed", "timed_out"]
    error: str | None = None
    rejudge_id: str

    def identity(self) -> str:
        return f"{self.submission_id}:{self.rejudge_id}"


HoldRule = Literal["roofline", "best-fraction", "sibling"]


class ScoreHeld(Event):
    """The scorer held a score for review instead of ranking it (docs/operations.md): a case below its roofline
    floor, a score below the operator's fraction of the board's best, or one case far ahead of its siblings. An
    admin clears a false hold as a pre-check one (PrecheckCleared); a rescore then ranks it."""

    subject = "evt.score.held"
    submission_id: int
    leaderboard: str
    gpu: str
    user_id: str
    user_name: str
    run_id: str
    score: float
    rule: HoldRule
    reason: str

    def identity(self) -> str:
        return f"{self.submission_id}:{self.gpu}"


PRECHECK_EVENTS: tuple[type[Event], ...] = (PrecheckPolicySet, PrecheckCleared, SubmissionReinstated, ScoreHeld)
