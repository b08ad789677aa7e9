"""A service killed with SIGKILL mid-pipeline and restarted loses nothing and doubles nothing."""

from __future__ import annotations

import time

import pytest

from problems import PROBLEMS_ROOT
from tests.support.events import archived, query

pytestmark = pytest.mark.slow

CORRECT = (PROBLEMS_ROOT / "examples" / "vectoradd_py" / "submission.py").read_text()


def _any_run_started(database_url: str) -> bool:
    return bool(query(database_url, "SELECT 1 FROM run_requests WHERE status = 'running' LIMIT 1"))


def test_sigkilled_services_resume_without_loss_or_duplicates(platform, database_url):
    platform.load_bundled_problems()
    users = [platform.register(str(3000 + i), f"user{i}") for i in range(3)]
    ids = [platform.submit(cli, "vectoradd_py", "cpu", "leaderboard", CORRECT).json()["details"]["id"]
           for cli in users]

    platform.wait_for(lambda: _any_run_started(database_url), "a run to start", timeout=60)
    for name in ("dispatcher", "scorer", "ledger"):
        platform.kill(name)  # mid-pipeline: runs are executing, events are in flight
    time.sleep(1.0)
    platform.start("dispatcher", "scorer", "ledger")

    views = [platform.wait_done(cli, sid, timeout=180) for cli, sid in zip(users, ids, strict=True)]

    assert [v["job"]["status"] for v in views] == ["succeeded"] * 3, [v["job"] for v in views]
    for sid, view in zip(ids, views, strict=True):
        assert len(view["runs"]) == 6  # test, benchmark, leaderboard; public and secret
        assert len(archived(database_url, "SubmissionFinished", str(sid))) == 1
        assert len(archived(database_url, "ScoreComputed", str(sid))) == 1
        completed = archived(database_url, "RunCompleted", str(sid))
        assert sorted(e["run_id"] for e in completed) == sorted({e["run_id"] for e in completed})
    ranking = platform.ranking("vectoradd_py", "cpu")
    assert sorted(r["submission_id"] for r in ranking) == sorted(ids)
    # A row leaves the outbox once NATS acknowledged its publish, which can come after the ledger archived the event:
    # the claim is that it drains, nothing stuck in it.
    platform.wait_for(lambda: query(database_url, "SELECT count(*) AS n FROM outbox")[0]["n"] == 0,
                      "the outbox to drain")
