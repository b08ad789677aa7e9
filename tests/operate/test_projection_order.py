"""The read model does not depend on how the log was cut into batches, nor on a run's events racing its request."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from schemas.contracts import FullResult, SystemInfo
from schemas.events import RunCompleted, RunDispatched, RunRequested, RunStarted
from services.kit.db import apply_migrations, create_pool
from services.ledger.repository import project_batch
from tests.operate.conftest import stage

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
