"""Launching is idempotent per run and attempt: a dispatcher that loses its database between starting a job and
recording it, or dies and comes back, re-attaches to the job it started instead of starting a second one.

This is the double launch behind the flaky Postgres-restart test: the local runner was started twice into the same
run directory, and the first runner's result was clobbered. The scheduler and the local backend run here against
a real Postgres; the runner is the real one.
"""

from __future__ import annotations

import asyncio
import json
import time

import asyncpg
import pytest

from problems import PROBLEMS_ROOT
from runner.task.payload import build_payload
from runner.task.taskfile import load_problem
from services.dispatcher import repository
from services.dispatcher.backends import local
from services.dispatcher.backends.base import PENDING
from services.dispatcher.backends.local import LocalBackend
from services.dispatcher.planning import StoredRun
from services.dispatcher.scheduler import Lane, Scheduler
from services.kit.consumer import Kit
from services.kit.db import apply_migrations, create_pool

PROBLEM = PROBLEMS_ROOT / "examples" / "identity_py"


def identity_payload(run_id: str, mode: str = "test"):
    problem = load_problem(PROBLEM)
    return build_payload(problem.task, (PROBLEM / "submission.py").read_text(), run_id=run_id, gpu="cpu",
                         mode=mode, secret=False, seed=None)


class RecordingRelay:
    """Stands in for the outbox relay: what the scheduler commits is all this test needs to see."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, bytes]] = []

    async def publish_now(self, rows) -> None:
        self.rows.extend(rows)

    def subjects(self) -> list[str]:
        return [subject for _, subject, _ in self.rows]


@pytest.fixture
def runner_starts(monkeypatch) -> list[list[str]]:
    starts: list[list[str]] = []
    real_popen = local.subprocess.Popen

    def counting_popen(command, *args, **kwargs):
        starts.append(command)
        return real_popen(command, *args, **kwargs)

    monkeypatch.setattr(local.subprocess, "Popen", counting_popen)
    return starts


async def _wait_finished(pool: asyncpg.Pool, run_id: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while await pool.fetchval("SELECT status FROM dispatch_runs WHERE run_id = $1", run_id) != "finished":
        assert time.monotonic() < deadline, "the run did not finish"
        await asyncio.sleep(0.1)


async def test_a_launch_whose_record_failed_reattaches_to_the_live_runner(database_url, tmp_path, monkeypatch,
                                                                           runner_starts):
    await asyncio.to_thread(apply_migrations, database_url)
    pool = await create_pool(database_url, 4)
    run_id = "1.cpu.test"
    async with pool.acquire() as conn:
        stored = StoredRun.model_validate(identity_payload(run_id).model_dump() | {"leaderboard": "identity_py"})
        await repository.enqueue(conn, run_id, 1, "cpu", stored.model_dump(mode="json"), 600)

    real_mark_launched = repository.mark_launched
    failures: list[str] = []

    async def mark_launched_once_failing(conn, *args):
        if not failures:  # as when Postgres restarts between launching the job and recording it
            failures.append(args[0])
            raise asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation")
        return await real_mark_launched(conn, *args)

    monkeypatch.setattr(repository, "mark_launched", mark_launched_once_failing)
    relay = RecordingRelay()
    scheduler = Scheduler(Kit(pool=pool, relay=relay), {"cpu": Lane(LocalBackend(tmp_path / "runs"), 1)},
                          owner="dispatcher-a", max_attempts=3, database_url=database_url)
    await scheduler.start()
    try:
        await _wait_finished(pool, run_id)
    finally:
        await scheduler.stop()
        await pool.close()

    assert failures == [run_id]
    assert len(runner_starts) == 1  # the second launch found the runner still at work
    assert relay.subjects().count("evt.run.completed") == 1 and "evt.run.failed" not in relay.subjects()
    completed = next(json.loads(p) for _, s, p in relay.rows if s == "evt.run.completed")
    assert completed["result"]["success"] and completed["result"]["runs"]["test"]["run"]["passed"]
    assert completed["leaderboard"] == "identity_py"  # a field of the stored run, named by RunCompleted


async def test_a_restarted_dispatcher_finds_the_runner_again_and_can_cancel_it(tmp_path, runner_starts):
    key = "2.cpu.test.1"
    first = LocalBackend(tmp_path / "runs")
    job_ref = await first.launch(identity_payload("2.cpu.test"), key)

    restarted = LocalBackend(tmp_path / "runs")  # a new process knows nothing but the directory
    assert await restarted.launch(identity_payload("2.cpu.test"), key) == job_ref
    assert len(runner_starts) == 1
    assert await restarted.poll(job_ref) is PENDING

    await restarted.cancel(job_ref)
    deadline = time.monotonic() + 10
    while local._runner_pids(tmp_path / "runs" / key / "result.json"):
        assert time.monotonic() < deadline, "the runner survived its cancellation"
        await asyncio.sleep(0.05)
    lost = await restarted.poll(job_ref)
    assert lost.reason == "lost" and "without a result" in lost.detail
    for child in first._children.values():  # the test process is the killed runner's parent: reap it
        child.wait()


async def test_a_runner_whose_command_line_cannot_be_read_yet_is_not_started_twice(tmp_path, monkeypatch):
    """Popen returns while the exec is still under way, and until the kernel has laid out the new program's
    arguments its /proc/<pid>/cmdline reads empty: a relaunch right then used to start a second runner (seen once
    in a loaded full run). Here the runner is a process whose command line never names the result file."""
    starts: list[list[str]] = []
    real_popen = local.subprocess.Popen

    def unreadable_runner(command, *args, **kwargs):
        starts.append(command)
        return real_popen(["sleep", "30"], *args, **kwargs)

    monkeypatch.setattr(local.subprocess, "Popen", unreadable_runner)
    key = "3.cpu.test.1"
    first = LocalBackend(tmp_path / "runs")
    job_ref = await first.launch(identity_payload("3.cpu.test"), key)
    try:
        restarted = LocalBackend(tmp_path / "runs")
        assert await restarted.launch(identity_payload("3.cpu.test"), key) == job_ref
        assert len(starts) == 1
        assert await restarted.poll(job_ref) is PENDING
    finally:
        await first.cancel(job_ref)
        for child in first._children.values():
            child.wait()
