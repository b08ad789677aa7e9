"""Scale-out on one machine: two replicas each of the dispatcher, scorer and ledger, a 3-node NATS cluster.

Every submission must be handled once, and the read model and boards must be what one replica applying the log in
stream order makes of it (the `events replay` rebuild is exactly that single replica).
"""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from problems import PROBLEMS_ROOT
from services.kit.embedded import free_port
from tests.operate.cluster import Cluster
from tests.operate.conftest import run_cli
from tests.operate.test_rejudge_replay import assert_same, dump, wait_projected
from tests.support.events import query
from tests.support.platform import Platform, identity_board

pytestmark = pytest.mark.slow

CODE = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_text()
SUBMISSIONS = 24
REPLICATED = ("dispatcher", "scorer", "ledger")


@pytest.fixture
def cluster(tmp_path):
    running = Cluster(tmp_path / "nats")
    running.start()
    yield running
    running.stop()


def start_replica(platform: Platform, name: str, replica: int, nats_url: str) -> int:
    metrics_port = free_port()
    env = platform.env() | {"KB_NATS_URL": nats_url, "KB_WORKER_ID": f"{name}-{replica}",
                            "KB_METRICS_PORT": str(metrics_port), "KB_LOG_LEVEL": "INFO"}
    log = open(platform.workdir / f"{name}-{replica}.log", "ab")  # noqa: SIM115 - the child owns it
    platform.children[f"{name}-{replica}"] = subprocess.Popen(
        [sys.executable, "-m", "services.cli", "serve", name], env=env, stdout=log, stderr=subprocess.STDOUT)
    return metrics_port


def _answers(port: int) -> bool:
    try:
        return scrape(port, "/health").status_code == 200
    except httpx.TransportError:
        return False


def scrape(port: int, path: str = "/metrics") -> httpx.Response:
    return httpx.get(f"http://127.0.0.1:{port}{path}", timeout=5)


def test_two_replicas_of_each_consumer_on_a_nats_cluster_handle_every_submission_once(
        cluster, database_url, tmp_path):
    platform = Platform(cluster.nodes[0].url, database_url, tmp_path, null_gpus=("null",))
    ports = {}
    try:
        platform.start("gateway")
        for name in REPLICATED:
            for replica in (1, 2):
                ports[f"{name}-{replica}"] = start_replica(platform, name, replica, cluster.nodes[replica].url)
        for port in ports.values():  # the status server answers once a replica has migrated and declared streams
            platform.wait_for(lambda p=port: _answers(p), "replicas to start", timeout=90)
        platform.add_boards(identity_board("wide", ["null"]))
        users = [platform.register(str(7100 + i), f"user{i}") for i in range(4)]

        def submit(i: int) -> int:
            response = platform.submit(users[i % len(users)], "wide", "null", "leaderboard", CODE)
            assert response.status_code == 202, response.text
            return response.json()["details"]["id"]

        with ThreadPoolExecutor(8) as pool:
            ids = list(pool.map(submit, range(SUBMISSIONS)))
        for i, submission_id in enumerate(ids):
            assert platform.wait_done(users[i % len(users)], submission_id)["job"]["status"] == "succeeded"

        counts = query(database_url, """
            SELECT event_type, count(*) AS n, count(DISTINCT correlation_id) AS distinct_n FROM event_archive
            WHERE event_type IN ('SubmissionAccepted', 'RunRequested', 'RunCompleted', 'ScoreComputed',
                                 'SubmissionFinished') GROUP BY event_type ORDER BY event_type""")
        expected = {"RunCompleted": 2, "RunRequested": 2, "ScoreComputed": 1, "SubmissionAccepted": 1,
                    "SubmissionFinished": 1}
        assert {r["event_type"]: (r["n"], r["distinct_n"]) for r in counts} == {
            kind: (per * SUBMISSIONS, SUBMISSIONS) for kind, per in expected.items()}
        assert query(database_url, "SELECT count(*) AS n FROM dispatch_runs WHERE status = 'finished'")[0]["n"] == \
            2 * SUBMISSIONS
        ranking = platform.ranking("wide", "null")
        # equal scores: each user's earliest submission, all sharing rank 1
        earliest = query(database_url, "SELECT DISTINCT ON (user_id) id FROM submissions "
                                       "ORDER BY user_id, submitted_at, id")
        assert sorted(r["submission_id"] for r in ranking) == sorted(r["id"] for r in earliest)
        assert {r["rank"] for r in ranking} == {1}

        # both replicas of the dispatcher and of the scorer did work; the ledger's standby waited its turn
        handled = {name: scrape(port).text for name, port in ports.items()}
        for name in ("dispatcher-1", "dispatcher-2", "scorer-1", "scorer-2"):
            assert 'outcome="ok"' in handled[name], name
        assert sum('kb_events_handled_total{consumer="ledger-project"' in handled[f"ledger-{r}"] for r in (1, 2)) == 1
        assert 'kb_runs_total{backend="null",outcome="completed"}' in handled["dispatcher-1"] + handled["dispatcher-2"]
        assert "kb_consumer_pending" in handled["scorer-1"]
        assert scrape(ports["scorer-1"], "/ready").status_code == 200
        assert scrape(ports["scorer-1"], "/health").json() == {"status": "ok"}
        assert 'route="/submission/{leaderboard}/{gpu}/{mode}"' in platform.http.get("/metrics").text

        wait_projected(platform, database_url)
        live = dump(database_url)
        run_cli(platform, "events", "replay", "all", "--source", "stream")
        assert_same(live, dump(database_url))
    finally:
        platform.stop()
