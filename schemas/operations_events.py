"""Operator facts: rejudging a leaderboard, and the score revisions it causes.

A rejudge is recorded as events, not table edits, so a board stays auditable: which rule or harness judged each
score, when it changed, and who asked.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from schemas.envelope import Event

RejudgeAction = Literal["rescore", "rerun"]


class RejudgeRequested(Event):
    """An operator asked for a board's scores to be recomputed (`rescore`) or its runs repeated (`rerun`)."""

    subject = "evt.rejudge.requested"
    rejudge_id: str
    leaderboard: str
    gpu: str | None = None  # None: every GPU of the board
    action: RejudgeAction
    # the rule in force when the rejudge was asked for; a rescore judges every stored result by it
    ranking_by: str = ""
    # the board's task (harness included) in force when a rerun was asked for
    task_hash: str = ""
    requested_by: str = ""
    reason: str = ""
    # compare only scores measured on the board's reference hardware (the comparable fingerprint); others withdrawn
    same_hardware: bool = False

    def identity(self) -> str:
        return self.rejudge_id


class RerunRun(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")
    run_id: str
    gpu: str
    mode: str
    secret: bool = False


class RerunPlanned(Event):
    """The dispatcher queued fresh runs of a ranked submission, under the board's current task."""

    subject = "evt.rejudge.rerun_planned"
    rejudge_id: str
    submission_id: int
    leaderboard: str
    runs: list[RerunRun]

    def identity(self) -> str:
        return f"{self.rejudge_id}:{self.submission_id}"


class ScoreRevised(Event):
    """A submission's score on one GPU changed by a rejudge; `score` None means it no longer ranks."""

    subject = "evt.score.revised"
    rejudge_id: str
    submission_id: int
    leaderboard: str
    gpu: str
    user_id: str
    user_name: str
    run_id: str
    score: float | None
    secret_score: float | None = None
    previous_score: float | None = None
    ranking_by: str
    harness_version: str = ""
    submitted_at: datetime
    reason: str = ""

    def identity(self) -> str:
        return f"{self.rejudge_id}:{self.submission_id}:{self.gpu}"


class RejudgeCompleted(Event):
    """A rescore ended (a rerun ends submission by submission, with each ScoreRevised)."""

    subject = "evt.rejudge.completed"
    rejudge_id: str
    leaderboard: str
    gpu: str | None = None
    action: RejudgeAction
    submissions: int
    revised: int

    def identity(self) -> str:
        return self.rejudge_id


OPERATIONS_EVENTS: tuple[type[Event], ...] = (RejudgeRequested, RerunPlanned, ScoreRevised, RejudgeCompleted)
