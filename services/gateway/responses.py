"""The shapes of the main answers, as pydantic models, so that OpenAPI shows them (services/core/presentation/views.py makes them).

Declared as each route's documented response (`documents()`), not as its `response_model`: FastAPI would then
validate and re-serialize every answer through the model, which can change the bytes popcorn-cli and the web
clients read (a float field turns the integer 1 into 1.0; a model orders keys its own way). The wire format stays
the views' own.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


def documents(model: Any, status: int = 200) -> dict[int | str, dict[str, Any]]:
    """A route's `responses=` entry: `model` is the shape of its `status` answer."""
    return {status: {"model": model}}


class Harness(BaseModel):
    protected: bool
    reason: str


class Leaderboard(BaseModel):
    id: int
    name: str
    description: str
    task: dict[str, Any]  # empty for a closed board the caller holds no invite to
    deadline: str | None
    gpu_types: list[str]
    visibility: str
    creator_id: int | None
    forum_id: int | None
    harness: Harness


class RunnerQueue(BaseModel):
    runner: str
    gpu: str
    queued_jobs: int | None
    running_jobs: int | None
    available_runners: int | None
    status: str
    error: str | None
    position: int | None  # 1 = next, for a waiting submission
    estimated_wait_s: float | None
    estimated_start: str | None


class Run(BaseModel):
    start_time: str | None
    end_time: str | None
    mode: str
    secret: bool
    runner: str
    score: float | None
    passed: bool
    result: dict[str, Any] | None = None  # only for a public run of a stage whose output clients see


class Job(BaseModel):
    status: str | None
    error: str | None
    last_heartbeat: str | None


class Submission(BaseModel):
    id: int
    leaderboard_id: int
    leaderboard_name: str
    file_name: str
    code: str
    user_id: str
    submission_time: str | None
    done: bool
    mode: str
    gpus: list[str]
    runs: list[Run]
    job: Job
    runner_queue: RunnerQueue | None
    warnings: list[str]


class RankedRun(BaseModel):
    gpu_type: str
    score: float | None


class UserSubmission(BaseModel):
    id: int
    leaderboard_name: str
    file_name: str
    submission_time: str | None
    done: bool
    runs: list[RankedRun]


class RankingEntry(BaseModel):
    submission_id: int
    rank: int
    submission_name: str
    submission_time: str | None
    submission_score: float
    leaderboard_name: str
    user_id: str
    user_name: str
    gpu_type: str
    score_interval: list[float] | None = None
    tied_within_noise: bool | None = None


class Count(BaseModel):
    count: int


class AcceptedDetails(BaseModel):
    id: int
    job_status_id: int


class Accepted(BaseModel):
    status: str  # "accepted"
    details: AcceptedDetails
    runner_queue: RunnerQueue


class Deleted(BaseModel):
    status: str  # "ok"
    submission_id: int


class Joined(BaseModel):
    status: str  # "ok"
    leaderboards: list[str]
