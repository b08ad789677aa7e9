"""Queue visibility (issue #4 point 5): a waiting submission's position in its GPU's queue and an estimated start
from recent run durations, in the submit and poll responses and GET /runner_queue/{gpu}."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from services.core.presentation import views
from tests.gateway.conftest import CODE, new_user
from tests.support.events import query


def test_estimated_wait_from_recent_durations():
    assert views.estimated_wait_s(None, 3, 0) is None  # nothing ran yet: no estimate
    assert views.estimated_wait_s(10.0, 0, 0) == 0.0
    assert views.estimated_wait_s(10.0, 3, 0) == 30.0
    assert views.estimated_wait_s(10.0, 3, 2) == 25.0  # two running: the queue drains twice as fast


def completed_run_on_idle(database_url: str, seconds: float) -> None:
    """One finished 10 s run on the `idle` GPU, as the ledger records it; no submission owns it."""
    finished = datetime.now(UTC)
    query(database_url, """
        INSERT INTO run_requests (run_id, submission_id, gpu, mode, secret, status, backend, requested_at,
                                  started_at, finished_at)
        VALUES ('eta-probe', -1, 'idle', 'test', false, 'completed', 'local', $1, $1, $2)
        ON CONFLICT (run_id) DO NOTHING""", finished - timedelta(seconds=seconds), finished)


def test_position_and_estimated_start_of_waiting_submissions(gateway):
    completed_run_on_idle(gateway.database_url, 10.0)
    _, cli_id = new_user(gateway)

    first = gateway.submit(cli_id, "idle", "idle", "test", CODE).json()
    second = gateway.submit(cli_id, "idle", "idle", "test", CODE).json()

    a, b = first["runner_queue"], second["runner_queue"]
    assert b["position"] == a["position"] + 1 and a["position"] >= 1
    assert b["estimated_wait_s"] == a["estimated_wait_s"] + 10.0
    started = datetime.fromisoformat(b["estimated_start"])
    expected = datetime.now(UTC) + timedelta(seconds=b["estimated_wait_s"])
    assert abs((started - expected).total_seconds()) < 5
    polled = gateway.submission(cli_id, second["details"]["id"])["runner_queue"]
    assert (polled["position"], polled["estimated_wait_s"]) == (b["position"], b["estimated_wait_s"])
    # a job submitted now would wait behind both
    queue = gateway.http.get("/runner_queue/IDLE").json()
    assert queue["position"] is None and queue["estimated_wait_s"] >= b["estimated_wait_s"] + 10.0
    assert queue["queued_jobs"] >= b["position"]


def test_a_finished_submission_has_no_place_in_the_queue(gateway):
    _, cli_id = new_user(gateway)
    accepted = gateway.submit(cli_id, "open", "null", "test", CODE).json()
    view = gateway.wait_done(cli_id, accepted["details"]["id"])
    assert view["runner_queue"]["position"] is None and view["runner_queue"]["gpu"] == "null"
    unknown = gateway.http.get("/runner_queue/B300").json()
    assert (unknown["position"], unknown["estimated_wait_s"], unknown["estimated_start"]) == (None, None, None)
