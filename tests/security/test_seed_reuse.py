"""Secret seeds (docs/security.md, "Secret seeds"): a seed that leaks from one secret run helps no other run.

The board runs the problem's own harness (`harness: problem`, the reference-kernels fixture pmpp_v2/vectoradd_py,
whose eval.py is the stock one), where user code shares a process with the harness and the pairing of seeds is
invertible. So a secret run's seed must be taken as known to the submission that runs with it.

The attack, through the dispatcher as a ranked submission takes it (ledger and dispatcher on Postgres, the payloads
the run queue stores) and the runner's sandbox: a first submission (seed_reuse/spy.py) recovers the seed its
secret run is handed; a second one (seed_reuse/exploit.py) is written with that seed and answers every input of
its own runs by lookup, computing nothing. With one secret seed per board, its secret run is predicted and it
ranks; with a seed per run, its secret run fails the checks and the scorer refuses it.
"""

from __future__ import annotations

import asyncio
import re
import secrets
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest

from runner.confinement.sandbox import SandboxPolicy
from runner.stages.execute import execute
from runner.task.taskfile import load_problem
from schemas.contracts import FullResult, RunPayload
from schemas.events import LeaderboardCreated, PlannedRun, SubmissionAccepted, SubmissionReceived
from services.dispatcher.handlers import kit as dispatcher_kit
from services.dispatcher.handlers import router as dispatcher_router
from services.ledger.handlers import kit as ledger_kit
from services.ledger.handlers import router as ledger_router
from services.scorer.scoring import decide, verdict_of
from tests.service import conftest as service_tier
from tests.support.service_tier import running_services

pytestmark = pytest.mark.slow

PROBLEM = Path(__file__).parents[1] / "fixtures" / "reference_kernels" / "problems" / "pmpp_v2" / "vectoradd_py"
ATTACKS = Path(__file__).parent / "seed_reuse"
BOARD = "vectoradd_v2"
LEAKED = re.compile(r"leaked secret seed: (\d+)")
# The service tier's fixture: a migrated database per test, cloned from the template (tests/conftest.py).
service_database = service_tier.service_database


def board() -> LeaderboardCreated:
    problem = load_problem(PROBLEM)
    return LeaderboardCreated(name=BOARD, task=problem.task.model_copy(update={"harness": "problem"}),
                              task_hash=problem.task_hash, gpus=["cpu"], deadline=datetime.now(UTC) + timedelta(days=1),
                              secret_seed=secrets.randbits(31))


def submitted(submission_id: int, user: str, code: str) -> SubmissionReceived:
    return SubmissionReceived(submission_id=submission_id, leaderboard=BOARD, gpus=["cpu"], mode="leaderboard",
                              user_id=user, user_name=user, file_name="submission.py", code=code,
                              correlation_id=str(submission_id))


async def queued_payloads(database_url: str, submission_id: int) -> dict[str, RunPayload]:
    """What a runner is handed for each run of the submission: the payload the dispatcher stored."""
    conn = await asyncpg.connect(database_url)
    try:
        rows = await conn.fetch("SELECT run_id, payload::text AS payload FROM dispatch_runs WHERE submission_id = $1",
                                submission_id)
    finally:
        await conn.close()
    return {row["run_id"]: RunPayload.model_validate_json(row["payload"]) for row in rows}


def run_all(payloads: list[RunPayload]) -> list[FullResult]:
    with ThreadPoolExecutor(max_workers=len(payloads)) as pool:
        return list(pool.map(lambda payload: execute(payload, sandbox=SandboxPolicy()), payloads))


def describe(result: FullResult) -> str:
    return "; ".join(f"{key}: passed={stage.run.passed} result={stage.run.result} stderr={stage.run.stderr[-600:]}"
                     for key, stage in result.runs.items() if stage.run) or f"runner error: {result.error}"


async def test_a_seed_leaked_from_one_secret_run_does_not_predict_the_next(service_database):
    async with running_services(service_database, ledger=(ledger_router, ledger_kit),
                                dispatcher=(dispatcher_router, dispatcher_kit)) as bus:
        await bus.publish(board())
        await bus.publish(submitted(1, "mallory", (ATTACKS / "spy.py").read_text()))
        await bus.settle()
        spy = (await queued_payloads(service_database, 1))["1.cpu.secret"]
        [spied] = await asyncio.to_thread(run_all, [spy])
        found = LEAKED.search(spied.runs["test"].run.stderr)
        assert found, describe(spied)
        leaked = int(found.group(1))
        assert leaked == spy.seed  # the attack's first half works under this harness: the run's seed is known

        exploit = (ATTACKS / "exploit.py").read_text().replace("SECRET = None", f"SECRET = {leaked}")
        await bus.publish(submitted(2, "mallory", exploit))
        await bus.settle()
        [accepted] = [event for event in bus.emitted(SubmissionAccepted) if event.submission_id == 2]
        payloads = await queued_payloads(service_database, 2)

    public, secret = await asyncio.to_thread(run_all, [payloads["2.cpu.public"], payloads["2.cpu.secret"]])
    verdicts = {"2.cpu.public": verdict_of(public, "leaderboard", accepted.ranking_by),
                "2.cpu.secret": verdict_of(secret, "private", accepted.ranking_by)}
    decision = decide("leaderboard", [PlannedRun(run_id=run.run_id, gpu=run.gpu, mode=run.mode, secret=run.secret)
                                      for run in accepted.runs], verdicts)

    assert verdicts["2.cpu.public"].passed, describe(public)  # the lookup works: public inputs are predictable
    # The secret inputs were not predicted: the run fails its first check and the submission never ranks...
    assert not verdicts["2.cpu.secret"].passed, describe(secret)
    assert "mismatched elements" in secret.runs["test"].run.result["test.0.error"], describe(secret)
    assert decision.status != "succeeded" and not decision.scores, decision
    assert payloads["2.cpu.secret"].seed != leaked  # ...because the second run has a seed of its own
