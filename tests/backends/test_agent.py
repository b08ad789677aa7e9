"""The runner agent end to end: the platform on the shipped NATS configuration (its users and permissions), the
dispatcher serving GPU `cpu` through the agent backend, and `python -m runner.agent` as a subprocess holding only
its runner user's password. A submission runs on the agent, is reported under the runner's name, recorded and
scored; a run no agent takes ends on the dispatcher's clock, and its job leaves the queue."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import nats
import pytest

from problems import PROBLEMS_ROOT
from schemas.streams import RUNNER_JOBS, runner_job_consumer
from services.kit.embedded import create_database, drop_database
from tests.support.events import archived
from tests.support.platform import Platform, identity_board
from tests.support.shipped_nats import ShippedNats, start_shipped_nats, stop

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BOARD = "agent_board"
CODE = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_text()
IDLE_BUDGET_S = 3
# GPU `cpu` is the shipped configuration's agent GPU (runner `local`); nobody serves `idle`'s runner here.
CATALOGUE = {"gpus": {"cpu": {"backend": "agent", "runners": ["local"]},
                      "idle": {"backend": "agent", "runners": ["nebius"], "max_job_s": IDLE_BUDGET_S}}}


@pytest.fixture(scope="module")
def world(postgres_server_url, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("agent")
    server = start_shipped_nats(workdir / "nats")
    name = f"kb_test_{uuid.uuid4().hex[:16]}"
    database_url = create_database(postgres_server_url, name)
    platform = Platform(server.url("services"), database_url, workdir, extra_env={
        "KB_LOCAL_GPUS": "{}", "KB_GPU_CATALOGUE": json.dumps(CATALOGUE), "KB_POLL_INTERVAL_S": "0.2",
        "KB_MAX_ATTEMPTS": "1", "PYTHONPATH": str(ROOT)})
    agent = None
    try:
        agent = start_agent(server, workdir)  # before any dispatcher has created its job consumer: it waits for it
        platform.start()
        platform.add_boards(identity_board(BOARD, ["cpu", "idle"]))
        cli = platform.register("7101", "agent-tester")
        yield platform, server, cli, database_url, agent
    finally:
        if agent is not None:
            agent.terminate()
            agent.wait(30)
        platform.stop()
        stop(server)
        drop_database(postgres_server_url, name)


def agent_env(server: ShippedNats, workdir: Path) -> dict[str, str]:
    """What a GPU node's pod holds: the runner user's password and where NATS is; nothing of the platform."""
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    password = server.url("runner-local").split(":")[2].split("@")[0]
    return keep | {"PYTHONPATH": str(ROOT), "KB_RUNNER_NATS_URL": f"nats://127.0.0.1:{server.port}",
                   "KB_RUNNER_NATS_PASSWORD": password, "KB_RUNNER_NAME": "local", "KB_RUNNER_GPU": "cpu",
                   "KB_RUNS_DIR": str(workdir / "agent-runs"), "PYTHONUNBUFFERED": "1"}


def start_agent(server: ShippedNats, workdir: Path) -> subprocess.Popen:
    log = open(workdir / "agent.log", "ab")  # noqa: SIM115 - the child owns it
    return subprocess.Popen([sys.executable, "-m", "runner.agent"], env=agent_env(server, workdir), stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def test_the_agent_holds_no_platform_credential(world):
    platform, server, *_ = world
    env = agent_env(server, platform.workdir)
    assert not {"KB_NATS_URL", "KB_DATABASE_URL", "KB_ADMIN_TOKEN"} & set(env)
    assert server.passwords["NATS_SERVICES_PASSWORD"] not in "".join(env.values())


def test_a_submission_on_an_agent_gpu_runs_on_the_agent_and_is_scored(world):
    platform, _, cli, database_url, agent = world
    response = platform.submit(cli, BOARD, "cpu", "leaderboard", CODE)
    assert response.status_code == 202, response.text
    submission_id = response.json()["details"]["id"]
    view = platform.wait_done(cli, submission_id, timeout=180)
    assert agent.poll() is None, (platform.workdir / "agent.log").read_text()
    assert view["job"]["status"] == "succeeded", view
    completed = archived(database_url, "RunCompleted", str(submission_id))
    assert sorted(c["run_id"].rsplit(".", 1)[1] for c in completed) == ["public", "secret"]
    assert all(c["backend"] == "agent" and c["result"]["system"]["runtime"] == "CPU" for c in completed)
    for dispatched in archived(database_url, "RunDispatched", str(submission_id)):
        assert dispatched["backend"] == "agent" and dispatched["job_ref"].split(":", 1)[1] == dispatched["run_id"]
    platform.wait_for(lambda: submission_id in {r["submission_id"] for r in platform.ranking(BOARD, "cpu")},
                      "the score on the board")
    log = (platform.workdir / "agent.log").read_text()
    assert f"reported {submission_id}.cpu.public" in log and f"reported {submission_id}.cpu.secret" in log


# A hostile submission looks for the runner's password in its environment and in every process's it can read.
PROBE = CODE + """

def _credential_in_reach():
    import glob
    import os

    if any(name.startswith("KB_") for name in os.environ):
        return True
    for path in glob.glob("/proc/[0-9]*/environ"):
        try:
            with open(path, "rb") as handle:
                if b"KB_RUNNER_NATS_PASSWORD" in handle.read():
                    return True
        except OSError:
            pass
    return False


if _credential_in_reach():
    raise RuntimeError("the runner's NATS password is within reach")
"""


def test_a_submission_on_the_agent_reaches_no_credential(world):
    """With the sandbox off (`--no-sandbox`) this fails: the run then shares the agent's uid and reads its
    /proc/<pid>/environ."""
    platform, _, cli, database_url, _ = world
    response = platform.submit(cli, BOARD, "cpu", "test", PROBE)
    assert response.status_code == 202, response.text
    submission_id = response.json()["details"]["id"]
    view = platform.wait_done(cli, submission_id, timeout=180)
    [completed] = archived(database_url, "RunCompleted", str(submission_id))
    assert completed["result"]["runs"]["test"]["run"]["passed"] is True, (view, completed["result"])


def test_a_run_no_agent_takes_times_out_and_leaves_the_queue(world):
    platform, server, cli, database_url, _ = world
    response = platform.submit(cli, BOARD, "idle", "test", CODE)
    assert response.status_code == 202, response.text
    submission_id = response.json()["details"]["id"]
    view = platform.wait_done(cli, submission_id, timeout=60)
    assert view["job"]["status"] != "succeeded", view
    [failed] = archived(database_url, "RunFailed", str(submission_id))
    assert failed["reason"] == "timeout" and f"budget of {IDLE_BUDGET_S} s" in failed["detail"], failed
    assert asyncio.run(_pending(server.url("services"), runner_job_consumer("nebius", "idle"))) == 0


async def _pending(url: str, consumer: str) -> int:
    client = await nats.connect(url)
    try:
        return (await client.jetstream().consumer_info(RUNNER_JOBS.name, consumer)).num_pending
    finally:
        await client.close()
