"""Synthetic ranked history for the read benchmark: the events a real board's life writes to the log.

Each ranked submission is the facts the producers publish for it (received, accepted, its public run completed with
a leaderboard stage, scored, finished); the ledger projects them like any others. Scores are spread so users hold
distinct bests with some ties, and each user improves now and then.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from schemas.contracts import EvalResult, FullResult, RunResult, SystemInfo
from schemas.credentials import cli_id_hash
from schemas.envelope import Event
from schemas.events import (
    CliUserRegistered,
    PlannedRun,
    RunCompleted,
    ScoreComputed,
    SubmissionAccepted,
    SubmissionFinished,
    SubmissionReceived,
)

CODE = "import torch\n\ndef custom_kernel(data):\n    return data.clone()\n"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def cli_id_of(user_id: str) -> str:
    """The CLI id of a user made by `users` (events carry only its digest)."""
    return f"bench-cli-{user_id}"


def users(count: int, first_id: int = 900_000) -> list[CliUserRegistered]:
    return [CliUserRegistered(user_id=str(first_id + i), user_name=f"bench{i}",
                              cli_id_sha256=cli_id_hash(cli_id_of(str(first_id + i))))
            for i in range(count)]


def _stage(mean_ns: float, err_ns: float, stage: str) -> EvalResult:
    at = T0.isoformat()
    result = {"benchmark-count": "1", "benchmark.0.spec": "n: 1024", "benchmark.0.mean": f"{mean_ns:.1f}",
              "benchmark.0.err": f"{err_ns:.1f}", "check": "pass", "harness-version": "bench"}
    if stage == "test":
        result = {"test-count": "1", "test.0.status": "pass", "check": "pass", "harness-version": "bench"}
    return EvalResult(start=at, end=at, run=RunResult(success=True, passed=True, result=result))


def submission_events(submission_id: int, board: str, gpu: str, user: CliUserRegistered, mean_ns: float,
                      at: datetime, secret: bool = False) -> list[Event]:
    """With `secret`, the ranked run has its secret twin, as a real ranked submission does: a running scorer then
    scores it (and moves its best table) instead of refusing it for the missing twin."""
    run_id = f"{submission_id}.{gpu}.public"
    tags = {"correlation_id": str(submission_id), "occurred_at": at}
    result = FullResult(success=True, system=SystemInfo(gpu=gpu),
                        runs={s: _stage(mean_ns, mean_ns * 0.01, s) for s in ("test", "benchmark", "leaderboard")})
    runs = [PlannedRun(run_id=run_id, gpu=gpu, mode="leaderboard")]
    twins: list[Event] = []
    if secret:
        runs.append(PlannedRun(run_id=f"{submission_id}.{gpu}.secret", gpu=gpu, mode="leaderboard", secret=True))
        twins.append(RunCompleted(run_id=runs[1].run_id, submission_id=submission_id, leaderboard=board, gpu=gpu,
                                  mode="leaderboard", secret=True, backend="bench", result=result, **tags))
    return [
        SubmissionReceived(submission_id=submission_id, leaderboard=board, gpus=[gpu], mode="leaderboard",
                           user_id=user.user_id, user_name=user.user_name, file_name=f"k{submission_id}.py",
                           code=CODE, **tags),
        SubmissionAccepted(submission_id=submission_id, leaderboard=board, user_id=user.user_id,
                           user_name=user.user_name, mode="leaderboard", ranking_by="last", submitted_at=at,
                           runs=runs, **tags),
        *twins,
        RunCompleted(run_id=run_id, submission_id=submission_id, leaderboard=board, gpu=gpu, mode="leaderboard",
                     backend="bench", result=result, **tags),
        ScoreComputed(submission_id=submission_id, leaderboard=board, gpu=gpu, user_id=user.user_id,
                      user_name=user.user_name, run_id=run_id, score=mean_ns / 1e9, ranking_by="last",
                      harness_version="bench", submitted_at=at, **tags),
        SubmissionFinished(submission_id=submission_id, status="succeeded", **tags),
    ]


def ranked_history(submissions: int, people: list[CliUserRegistered], board: str, gpu: str,
                   first_id: int = 1, seed: int = 12, secret: bool = False) -> Iterator[list[Event]]:
    """Per submission, its events; users take turns at random, each getting a little faster over time."""
    rng = random.Random(seed)
    skill = [rng.uniform(5_000, 50_000) for _ in people]
    for n in range(submissions):
        who = rng.randrange(len(people))
        skill[who] *= rng.uniform(0.97, 1.03)
        mean = round(skill[who], -1)  # coarse, so some scores tie
        yield submission_events(first_id + n, board, gpu, people[who], mean, T0 + timedelta(seconds=n),
                                secret)
