"""Runs a dispatcher left behind when it died are finished by the next one (docs/operations.md "After a crash").

Each test leaves a submission's runs in `dispatch_runs` the way a SIGKILLed dispatcher leaves them, with the rest of
the platform running, then starts a dispatcher and waits for the submission to finish:

- `queued`: claimed, not yet launched;
- `launched`: the job started and recorded (RunDispatched and RunStarted out), not yet collected;
- `finished`: the end recorded, its RunCompleted committed to the outbox but never published.

Of each submission's two runs, one was claimed by another replica whose lease has run out, and one by this
dispatcher's own previous life, under a lease that has not: a dispatcher takes its own runs back at once.
"""

from __future__ import annotations

import asyncio
import json
import time

import asyncpg
import pytest

from problems import PROBLEMS_ROOT
from schemas.events import RunDispatched, RunStarted
from services.dispatcher.backends.null import null_result
from services.dispatcher.scheduler import completed_event
from services.kit import outbox
from services.kit.bus import publish_all
from tests.support.events import archived, query
from tests.support.platform import Platform, identity_board

pytestmark = pytest.mark.slow

CODE = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_text()
BOARD = "recovery"
WORKER = "test-dispatcher"  # the KB_WORKER_ID Platform gives the dispatcher
DEAD_REPLICA = "dispatcher-that-died"
# Far more than a recovery takes, far less than the own lease left behind: a wait for that lease fails the test.
RECOVERED_WITHIN_S = 45
OWN_LEASE_LEFT_S = 600


def _left_by_a_crash(platform: Platform, database_url: str) -> tuple[str, int, list[dict]]:
    """A submission admitted and planned by a dispatcher that serves none of its GPU, so its runs wait in the queue
    untouched; that dispatcher is SIGKILLed. Returns the user's CLI id, the submission and its runs."""
    platform.extra_env = {"KB_NULL_GPUS": "[]", "KB_WORKER_ID": "planner"}
    platform.start()
    platform.add_boards(identity_board(BOARD, ["null"]))
    cli = platform.register("7201", "rhea")
    submission = platform.submit(cli, BOARD, "null", "leaderboard", CODE).json()["details"]["id"]
    platform.wait_for(lambda: query(database_url, "SELECT 1 FROM dispatch_runs WHERE submission_id = $1",
                                    submission), "the runs to be planned")
    platform.kill("dispatcher")
    runs = query(database_url, "SELECT run_id, submission_id, gpu, payload, status FROM dispatch_runs "
                               "WHERE submission_id = $1 ORDER BY run_id", submission)
    assert len(runs) == 2 and {r["status"] for r in runs} == {"queued"}, runs
    platform.extra_env = {}
    return cli, submission, runs


def _leases(runs: list[dict]) -> list[tuple[str, str, float]]:
    """(run id, lease owner, seconds the lease has left) for each run: a dead replica's run out, our own not."""
    return [(runs[0]["run_id"], DEAD_REPLICA, -5.0), (runs[1]["run_id"], WORKER, OWN_LEASE_LEFT_S)]


def _mode(run: dict) -> str:
    return json.loads(run["payload"])["mode"]


def _job_ref(run: dict) -> str:
    return f"null:{_mode(run)}:{run['run_id']}.1"  # what the null backend answers a launch with key <run>.1


async def _write(database_url: str, sql: str, rows: list[tuple]) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        await conn.executemany(sql, rows)
    finally:
        await conn.close()


def _leave_queued(database_url: str, runs: list[dict]) -> None:
    asyncio.run(_write(database_url, """
        UPDATE dispatch_runs SET attempts = 1, lease_owner = $2, lease_until = now() + make_interval(secs => $3)
        WHERE run_id = $1""", _leases(runs)))


def _launched_events(runs: list[dict]) -> list:
    events: list = []
    for run in runs:
        common = {"run_id": run["run_id"], "submission_id": run["submission_id"], "gpu": run["gpu"], "attempt": 1,
                  "correlation_id": str(run["submission_id"])}
        events += [RunDispatched(backend="null", job_ref=_job_ref(run), **common), RunStarted(**common)]
    return events


def _leave_launched(platform: Platform, database_url: str, runs: list[dict]) -> None:
    asyncio.run(_write(database_url, """
        UPDATE dispatch_runs SET status = 'launched', attempts = 1, backend = 'null', job_ref = $4,
               launched_at = now(), lease_owner = $2, lease_until = now() + make_interval(secs => $3)
        WHERE run_id = $1""", [(*lease, _job_ref(run)) for lease, run in zip(_leases(runs), runs, strict=True)]))
    asyncio.run(publish_all(platform.nats_url, _launched_events(runs)))  # published when the launch was recorded


def _leave_finished(platform: Platform, database_url: str, runs: list[dict]) -> None:
    """The dispatcher's last transaction committed (the run finished, its RunCompleted in the outbox) and it died
    before publishing."""
    asyncio.run(publish_all(platform.nats_url, _launched_events(runs)))
    completions = [completed_event(run["run_id"], run["submission_id"], run["gpu"], json.loads(run["payload"]),
                                   "null", null_result(_mode(run))) for run in runs]

    async def commit() -> None:
        conn = await asyncpg.connect(database_url)
        try:
            async with conn.transaction():
                await conn.execute("""
                    UPDATE dispatch_runs SET status = 'finished', attempts = 1, backend = 'null', launched_at = now(),
                           finished_at = now(), lease_owner = NULL WHERE run_id = ANY($1::text[])""",
                                   [run["run_id"] for run in runs])
                await outbox.enqueue(conn, outbox.rows_of(completions))
        finally:
            await conn.close()

    asyncio.run(commit())


LEAVE = {
    "queued": lambda platform, database_url, runs: _leave_queued(database_url, runs),
    "launched": _leave_launched,
    "finished": _leave_finished,
}


@pytest.mark.parametrize("state", list(LEAVE))
def test_a_run_a_dead_dispatcher_left_is_finished_by_the_next(state, nats_url, database_url, tmp_path):
    platform = Platform(nats_url, database_url, tmp_path, null_gpus=("null",))
    try:
        cli, submission, runs = _left_by_a_crash(platform, database_url)
        LEAVE[state](platform, database_url, runs)

        restarted = time.monotonic()
        platform.start("dispatcher")
        view = platform.wait_done(cli, submission, timeout=RECOVERED_WITHIN_S)
        took_s = time.monotonic() - restarted

        assert view["job"]["status"] == "succeeded", (view["job"], platform.log("dispatcher"))
        assert took_s < RECOVERED_WITHIN_S
        completed = archived(database_url, "RunCompleted", str(submission))
        assert sorted(e["run_id"] for e in completed) == [r["run_id"] for r in runs]  # each once
        assert query(database_url, "SELECT count(*) AS n FROM dispatch_runs WHERE submission_id = $1 "
                                   "AND status <> 'finished'", submission) == [{"n": 0}]
    finally:
        platform.stop()
