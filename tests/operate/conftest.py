"""A platform whose board runs on a GPU no backend serves: the test reports each run's result itself, as a runner on
a remote GPU host does, so scores can be chosen."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime

import pytest

from schemas.contracts import EvalResult, FullResult, RunResult, SystemInfo
from schemas.events import RunCompleted
from services.cli.main import app
from services.kit.bus import publish_all
from services.kit.embedded.databases import create_database, drop_database
from tests.support.events import archived, query
from tests.support.in_process import InProcessPlatform
from tests.support.platform import Platform, identity_board
from tests.support.upstream_db import SUBMISSIONS, create_upstream

GPU = "remote"


def run_cli(platform: Platform, *args: str, check: bool = True, process: bool = False):
    """`kernelbot ARGS` with the platform's settings: in this process (quick), or as its own process."""
    if process:
        done = subprocess.run([sys.executable, "-m", "services.cli", *args], env=platform.env(),
                              capture_output=True, text=True, timeout=120)
    else:
        from typer.testing import CliRunner


        env = {k: v for k, v in platform.env().items() if k.startswith("KB_")}
        result = CliRunner().invoke(app, list(args), env=env, catch_exceptions=False)
        done = subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)
    if check and done.returncode != 0:
        raise AssertionError(f"kernelbot {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done


def stage(stage_name: str, means_ns: list[float]) -> EvalResult:
    now = datetime(2026, 1, 1, tzinfo=UTC).isoformat()
    if stage_name == "test":
        result = {"test-count": "1", "test.0.status": "pass", "check": "pass", "harness-version": "h-1"}
    else:
        result = {"benchmark-count": str(len(means_ns)), "check": "pass", "harness-version": "h-1"}
        for i, mean in enumerate(means_ns):
            result |= {f"benchmark.{i}.spec": f"case {i}", f"benchmark.{i}.mean": str(mean)}
    return EvalResult(start=now, end=now, run=RunResult(success=True, passed=True, result=result))


def report_runs(platform: Platform, database_url: str, submission_id: int, means_ns: list[float],
                suffix: str = "", system: SystemInfo | None = None) -> None:
    """Act as the remote runner: a RunCompleted for every run requested of this submission (ids ending so)."""
    def requested():
        return [r for r in archived(database_url, "RunRequested", str(submission_id))
                if r["run_id"].endswith(suffix or ("public", "secret"))]

    platform.wait_for(lambda: len(requested()) == 2, "run requests")
    events = []
    for run in requested():
        result = FullResult(success=True, system=system or SystemInfo(gpu=GPU),
                            runs={s: stage(s, means_ns) for s in ("test", "benchmark", "leaderboard")})
        events.append(RunCompleted(run_id=run["run_id"], submission_id=submission_id, leaderboard=run["leaderboard"],
                                   gpu=run["gpu"], mode=run["mode"], secret=run["secret"], ranking_by="mean",
                                   backend="remote", result=result, correlation_id=str(submission_id)))
    asyncio.run(publish_all(platform.nats_url, events))


def ranked_users(platform: Platform, board: str) -> list[str]:
    return [row["user_name"] for row in platform.ranking(board, GPU)]


def mean_board(name: str):
    board = identity_board(name, [GPU])
    return board.model_copy(update={"task": board.task.model_copy(update={"ranking_by": "mean"})})


@pytest.fixture
def remote_platform(nats_url, database_url, tmp_path):
    running = InProcessPlatform(nats_url, database_url, tmp_path, local_gpus={"cpu": 1})
    running.start()
    yield running
    running.stop()


def wait_rows(database_url: str, sql: str, expected, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = query(database_url, sql)
        if rows == expected:
            return
        time.sleep(0.1)
    raise AssertionError(f"{sql} gave {rows}, not {expected}")


@pytest.fixture
def upstream_url(postgres_server_url):
    """A database shaped and filled as an upstream KernelBot deployment's (tests/support/upstream_db.py)."""
    name = f"kb_upstream_{uuid.uuid4().hex[:12]}"
    url = create_database(postgres_server_url, name)
    create_upstream(url)
    yield url
    drop_database(postgres_server_url, name)


@pytest.fixture
def imported(nats_url, database_url, upstream_url, tmp_path):
    """The test fixture's upstream deployment imported, then a board of the platform's own (`web-board`); answers
    the platform and the boards' ids by name."""
    platform = InProcessPlatform(nats_url, database_url, tmp_path, null_gpus=("null",))
    platform.start()
    try:
        run_cli(platform, "import-upstream", upstream_url, "--report", str(tmp_path / "report.txt"))
        platform.wait_for(lambda: len(archived(database_url, "SubmissionFinished")) == len(SUBMISSIONS),
                          "the imported history to be projected")
        platform.add_boards(identity_board("web-board", ["null"]))
        yield platform, {r["name"]: r["id"] for r in query(database_url, "SELECT id, name FROM leaderboards")}
    finally:
        platform.stop()
