"""Deliberate differences from upstream (docs/http-api.md "Deliberate differences from upstream KernelBot") not covered
by the route tests: no admin access without a configured token (#1), no secret seed anywhere (#2), `done` exactly when
final and a job that survives a gateway restart, with the kill switch still in force (#13)."""

from __future__ import annotations

import re

import httpx
import pytest

from services.gateway.app import create_app
from services.gateway.settings import GatewaySettings
from tests.gateway.admission import admin
from tests.gateway.conftest import CODE, cli, new_user
from tests.support.events import query
from tests.support.platform import SECRET_SEED

DISABLED = {"detail": "Admin API is disabled: no admin token is configured"}
ADMIN_CALLS = [("POST", "/admin/start"), ("POST", "/admin/stop"), ("GET", "/admin/stats"),
               ("GET", "/admin/submissions/1"), ("POST", "/admin/ban/1"), ("POST", "/admin/invites"),
               ("PUT", "/admin/leaderboards/x/rate-limits"), ("POST", "/admin/users"), ("POST", "/admin/export-hf")]


@pytest.mark.parametrize("token", [None, ""])
async def test_without_a_configured_token_every_admin_request_is_refused(token):
    # The guard answers before any dependency touches the database or the bus, so no server is needed here.
    app = create_app(GatewaySettings(admin_token=token))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway") as client:
        for method, path in ADMIN_CALLS:
            for headers in ({}, {"Authorization": "Bearer None"}, {"Authorization": "Bearer "}):
                response = await client.request(method, path, headers=headers)
                assert (response.status_code, response.json()) == (401, DISABLED), (method, path, headers)


def test_no_secret_seed_leaves_the_server(gateway):
    _, cli_id = new_user(gateway)
    submission_id = gateway.submit(cli_id, "open", "null", "leaderboard", CODE).json()["details"]["id"]
    gateway.wait_done(cli_id, submission_id)

    answers = (gateway.http.get("/leaderboards"), gateway.http.get("/leaderboards", headers=cli(cli_id)),
               gateway.http.get(f"/user/submissions/{submission_id}", headers=cli(cli_id)),
               gateway.http.get("/submissions/open/null"), gateway.http.get("/gpus/open"),
               gateway.http.get("/web/leaderboards/open"), gateway.http.get("/web"),
               admin(gateway, "GET", f"/admin/submissions/{submission_id}"))
    # The seeds a secret run was judged on (each its own, drawn by the dispatcher) and the board's own secret.
    run_seeds = [row["seed"] for row in query(gateway.database_url, "SELECT payload->>'seed' AS seed FROM dispatch_runs "
                                              "WHERE submission_id = $1 AND payload->>'secret' = 'true'",
                                              submission_id)]
    assert len(run_seeds) == 1 and run_seeds[0] is not None
    for response in answers:
        assert response.status_code == 200, (response.request.url, response.status_code)
        # by name and by value: a secret seed served under another name (`task.seed`) is as much a leak
        assert "secret_seed" not in response.text, response.request.url
        for value in (str(SECRET_SEED), *run_seeds):
            assert not re.search(rf"(?<![0-9]){value}(?![0-9])", response.text), (response.request.url, value)
    [closed] = [b for b in gateway.http.get("/leaderboards").json() if b["name"] == "closed"]
    assert closed["task"] == {}


def test_done_is_true_exactly_when_the_job_is_final_and_jobs_survive_a_gateway_restart(gateway):
    _, cli_id = new_user(gateway)
    waiting = gateway.submit(cli_id, "idle", "idle", "test", CODE).json()["details"]["id"]
    finishing = gateway.submit(cli_id, "open", "null", "leaderboard", CODE).json()["details"]["id"]

    assert admin(gateway, "POST", "/admin/stop").json()["accepts_jobs"] is False

    gateway.kill("gateway")
    gateway.start("gateway")

    try:  # the kill switch is durable too
        assert gateway.submit(cli_id, "open", "null", "test", CODE).status_code == 503
    finally:
        assert admin(gateway, "POST", "/admin/start").json()["accepts_jobs"] is True
    pending = gateway.submission(cli_id, waiting)
    assert (pending["done"], pending["job"]["status"]) == (False, "pending")
    assert pending["runner_queue"]["position"] >= 1
    final = gateway.wait_done(cli_id, finishing)
    assert (final["done"], final["job"]["status"]) == (True, "succeeded")
    for submission in gateway.http.get("/user/submissions", headers=cli(cli_id)).json():
        assert submission["done"] is (submission["id"] == finishing)
