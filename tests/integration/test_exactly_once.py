"""At-least-once delivery, exactly-once effect: duplicates, redeliveries and poison messages."""

from __future__ import annotations

import json
import time

import pytest

from problems import PROBLEMS_ROOT
from tests.support.events import archived, dead_letters, publish_raw, query

pytestmark = pytest.mark.slow

VECTORADD = PROBLEMS_ROOT / "examples" / "vectoradd_py"
CORRECT = (VECTORADD / "submission.py").read_text()


def _ranked(platform, cli_id: str) -> tuple[int, dict]:
    submission_id = platform.submit(cli_id, "vectoradd_py", "cpu", "leaderboard", CORRECT).json()["details"]["id"]
    return submission_id, platform.wait_done(cli_id, submission_id)


def test_the_same_run_completed_delivered_twice_counts_once(platform, database_url, nats_url):
    platform.load_bundled_problems()
    alice = platform.register("2001", "alice")
    submission_id, before = _ranked(platform, alice)
    [completed] = [e for e in archived(database_url, "RunCompleted", str(submission_id)) if not e["secret"]]

    # Once with its own message id (the stream's duplicate window drops it), once under a new id, as a
    # redelivery after the window would arrive: both must change nothing.
    body = json.dumps(completed).encode()
    publish_raw(nats_url, "evt.run.completed", body, {"Nats-Msg-Id": completed["event_id"]})
    publish_raw(nats_url, "evt.run.completed", body, {"Nats-Msg-Id": completed["event_id"] + ":again"})
    platform.wait_for(lambda: len(archived(database_url, "RunCompleted", str(submission_id))) == 3,
                      "the re-sent report to reach the archive")
    time.sleep(1.0)  # give the scorer every chance to (wrongly) judge it again

    assert len(archived(database_url, "ScoreComputed", str(submission_id))) == 1
    assert len(archived(database_url, "SubmissionFinished", str(submission_id))) == 1
    after = platform.submission(alice, submission_id)
    assert len(after["runs"]) == len(before["runs"]) == 6
    assert [r["submission_id"] for r in platform.ranking("vectoradd_py", "cpu")] == [submission_id]


def test_a_malformed_message_is_dead_lettered_and_the_service_keeps_working(platform, database_url, nats_url):
    platform.load_bundled_problems()
    bob = platform.register("2002", "bob")
    publish_raw(nats_url, "evt.run.completed", b'{"run_id": 12, "this is": not json')
    publish_raw(nats_url, "evt.submission.received", json.dumps({"submission_id": "nope"}).encode())

    submission_id, view = _ranked(platform, bob)

    assert view["job"]["status"] == "succeeded"
    letters = dead_letters(nats_url)
    consumers = {headers["Kb-Consumer"] for _, headers, _ in letters}
    assert {"scorer-run-completed", "ledger-project", "dispatcher-admit"} <= consumers
    for subject, headers, _ in letters:
        assert subject == f"dlq.{headers['Kb-Consumer']}"
        assert headers["Kb-Reason"]
    assert any(data.startswith(b'{"run_id": 12') for _, _, data in letters)
    # nothing the poison messages touched reached the read model
    assert query(database_url, "SELECT count(*) AS n FROM submissions")[0]["n"] == 1
