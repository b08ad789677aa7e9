"""The read model does not depend on how the log was cut into batches, nor on a run's events racing its request."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from schemas.contracts import FullResult, SystemInfo
from schemas.events import (
    RunCompleted,
    RunDispatched,
    RunRequested,
    RunStarted,
    SubmissionAccepted,
    SubmissionFinished,
)
from services.kit.db import apply_migrations, create_pool
from services.ledger.repository import project_batch
from tests.operate.conftest import stage
from tests.unit.test_projections import SYSTEM, TEST, completed, received

T0 = datetime(2026, 1, 1, tzinfo=UTC)
RUN = "5.H100.public"


def run_events():
    requested = RunRequested(run_id=RUN, submission_id=5, leaderboard="b", gpu="H100", mode="leaderboard",
                             timeout_s=60, occurred_at=T0)
    dispatched = RunDispatched(run_id=RUN, submission_id=5, gpu="H100", backend="modal", job_ref="fc-1",
                               occurred_at=T0 + timedelta(seconds=1))
    started = RunStarted(run_id=RUN, submission_id=5, gpu="H100", occurred_at=T0 + timedelta(seconds=2))
    result = FullResult(success=True, system=SystemInfo(gpu="H100"), runs={"test": stage("test", [])})
    completed = RunCompleted(run_id=RUN, submission_id=5, leaderboard="b", gpu="H100", mode="leaderboard",
                             result=result, occurred_at=T0 + timedelta(seconds=3))
    return requested, dispatched, started, completed


async def project(database_url: str, batches) -> dict:
    pool = await create_pool(database_url, 2)
    try:
        async with pool.acquire() as conn:
            await conn.execute("TRUNCATE run_requests, event_archive, runs")
            seq = 0
            for batch in batches:
                numbered = []
                for event in batch:
                    seq += 1
                    numbered.append((seq, event))
                async with conn.transaction():
                    await project_batch(conn, numbered)
            row = await conn.fetchrow("SELECT * FROM run_requests WHERE run_id = $1", RUN)
            return dict(row)
    finally:
        await pool.close()


def test_a_run_reported_before_its_request_is_recorded_as_if_in_order(database_url):
    apply_migrations(database_url)
    requested, dispatched, started, completed = run_events()

    in_order = asyncio.run(project(database_url, [[requested, dispatched, started, completed]]))
    one_by_one = asyncio.run(project(database_url, [[requested], [dispatched], [started], [completed]]))
    # a dispatcher died between its commit and its outbox publish: the request reaches the stream last
    request_last = asyncio.run(project(database_url, [[dispatched], [started, completed], [requested]]))

    assert in_order == one_by_one == request_last
    assert (in_order["status"], in_order["mode"], in_order["backend"], in_order["requested_at"]) == (
        "completed", "leaderboard", "modal", T0)
    assert in_order["started_at"] == T0 + timedelta(seconds=2) and in_order["success"] is True


def ranked_run_events():
    """A submission's life, as the producers publish it: received, accepted, one run started and completed with a
    passing test stage, a benchmark that failed its check and a leaderboard stage that did not compile; finished."""

    accepted = SubmissionAccepted(submission_id=7, leaderboard="grayscale", user_id="1", user_name="a",
                                  mode="test", ranking_by="last", submitted_at=T0, runs=[], occurred_at=T0)
    started = RunStarted(run_id="7.H100.public", submission_id=7, gpu="H100", occurred_at=T0 + timedelta(seconds=1))
    run = completed().model_copy(update={"occurred_at": T0 + timedelta(seconds=2)})
    finished = SubmissionFinished(submission_id=7, status="failed", error="benchmark failed",
                                  occurred_at=T0 + timedelta(seconds=3))
    return [received(7).model_copy(update={"submission_id": 7}), accepted, started, run, finished]


async def project_rows(database_url: str, batches) -> dict:
    pool = await create_pool(database_url, 2)
    try:
        async with pool.acquire() as conn:
            await conn.execute("TRUNCATE submissions, jobs, run_requests, event_archive, runs")
            seq = 0
            for batch in batches:
                numbered = []
                for event in batch:
                    seq += 1
                    numbered.append((seq, event))
                async with conn.transaction():
                    await project_batch(conn, numbered)
            return {
                "job": dict(await conn.fetchrow("SELECT status, error, last_heartbeat FROM jobs")),
                "submission": dict(await conn.fetchrow("SELECT status, done FROM submissions WHERE id = 7")),
                "run": dict(await conn.fetchrow("SELECT status, started_at, finished_at, success FROM run_requests")),
                "stages": [dict(r) for r in await conn.fetch(
                    "SELECT stage, passed, harness_version, start_time, recorded_seq, result FROM runs "
                    "ORDER BY start_time NULLS LAST, stage")],
            }
    finally:
        await pool.close()


def test_a_submissions_life_projects_the_same_in_one_batch_one_by_one_and_shuffled(database_url):
    apply_migrations(database_url)
    events = ranked_run_events()

    together = asyncio.run(project_rows(database_url, [events]))
    one_by_one = asyncio.run(project_rows(database_url, [[e] for e in events]))
    # the finish and the run's start reached the stream before what preceded them
    shuffled = asyncio.run(project_rows(database_url, [[events[4], events[2], events[1], events[0], events[3]]]))

    assert together == one_by_one
    assert {k: v for k, v in shuffled.items() if k != "stages"} == {k: v for k, v in together.items() if k != "stages"}
    assert together["job"] == {"status": "failed", "error": "benchmark failed",
                               "last_heartbeat": T0 + timedelta(seconds=1)}
    assert together["submission"] == {"status": "failed", "done": True}
    assert together["run"] == {"status": "completed", "started_at": T0 + timedelta(seconds=1),
                               "finished_at": T0 + timedelta(seconds=2), "success": True}
    test, benchmark, leaderboard = together["stages"]
    assert (test["stage"], test["passed"], test["harness_version"]) == ("test", True, "h-2")
    assert test["start_time"] == datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
    assert (benchmark["stage"], benchmark["passed"]) == ("benchmark", False)
    assert (leaderboard["stage"], leaderboard["passed"], leaderboard["harness_version"]) == ("leaderboard", False, "")
    assert leaderboard["result"]["compilation"]["stderr"] == "error: x"
    assert {s["recorded_seq"] for s in together["stages"]} == {4}  # the stream sequence orders runs in views


def test_a_run_the_runner_failed_keeps_its_own_verdict(database_url):
    apply_migrations(database_url)
    requested, _, _, completed = run_events()
    failed = completed.model_copy(update={"result": FullResult(success=False, error="runner error: boom")})

    row = asyncio.run(project(database_url, [[requested, failed]]))

    assert (row["status"], row["success"], row["result_error"]) == ("completed", False, "runner error: boom")
    assert row["system"] == SystemInfo().model_dump(mode="json")


def test_the_harness_version_is_the_runners_account_when_it_has_one(database_url):
    """Under an unprotected harness the result channel may be the submission's: the runner's `harness` wins."""

    apply_migrations(database_url)
    received, accepted, started, run, finished = ranked_run_events()
    forged = TEST.model_copy(update={"harness": {"kind": "problem", "version": "problem eval.py sha256:abc",
                                                 "protected": "false"}})
    run = run.model_copy(update={"result": FullResult(success=True, system=SYSTEM, runs={"test": forged})})

    rows = asyncio.run(project_rows(database_url, [[received, accepted, started, run, finished]]))

    [test] = rows["stages"]
    assert test["harness_version"] == "problem eval.py sha256:abc"  # not the result channel's "h-2"
