"""popcorn-cli's poll answered before routing (services/gateway/fastpaths/polls.py): the route's answer, byte for byte,
from one read; every other case still answered by the route."""

from __future__ import annotations

import asyncio

from services.core.readmodel import poll_reads
from services.gateway.fastpaths import polls
from services.kit.db import create_pool
from tests.gateway.conftest import CODE, cli, new_user


async def both_views(database_url: str, cli_id: str, user_id: str, submission_id: int) -> tuple[dict, dict]:
    pool = await create_pool(database_url, 1)
    try:
        row = await poll_reads.poll(pool, cli_id, submission_id)
        return polls.view_of(row), await polls.view(pool, submission_id, user_id)
    finally:
        await pool.close()


def test_the_one_read_gives_the_routes_view_done_or_waiting(gateway):
    user_id, cli_id = new_user(gateway)
    done = gateway.submit(cli_id, "open", "null", "leaderboard", CODE).json()["details"]["id"]
    gateway.wait_done(cli_id, done)
    waiting = gateway.submit(cli_id, "idle", "idle", "test", CODE).json()["details"]["id"]
    gateway.wait_for(lambda: asyncio.run(both_views(gateway.database_url, cli_id, user_id, waiting))[1]["runner_queue"]
                     ["position"] is not None, "the waiting submission queued")

    fast, routed = asyncio.run(both_views(gateway.database_url, cli_id, user_id, done))
    assert fast == routed
    assert len(fast["runs"]) >= 2 and any(run["score"] is not None for run in fast["runs"])
    assert all(run["start_time"].endswith("Z") for run in fast["runs"])
    assert polls.BODY.dump_json(fast) == polls.BODY.dump_json(routed)
    answer = gateway.http.get(f"/user/submissions/{done}", headers=cli(cli_id))
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    assert answer.json() == {**routed, "runner_queue": answer.json()["runner_queue"]}  # others' jobs may move it

    fast, routed = asyncio.run(both_views(gateway.database_url, cli_id, user_id, waiting))
    for view in (fast, routed):  # computed from the clock: compared below without it
        view["runner_queue"].pop("estimated_start")
    assert fast == routed and fast["done"] is False and fast["runner_queue"]["position"] is not None


def test_refusals_are_the_routes(gateway):
    _, owner = new_user(gateway)
    _, stranger = new_user(gateway)
    submission_id = gateway.submit(owner, "open", "null", "test", CODE).json()["details"]["id"]
    gateway.wait_done(owner, submission_id)

    def get(path: str, headers: dict) -> tuple[int, dict]:
        response = gateway.http.get(path, headers=headers)
        return response.status_code, response.json()

    path = f"/user/submissions/{submission_id}"
    assert get(path, cli(stranger)) == (403, {"detail": "Not authorized to view this submission"})
    assert get(path, cli("no-such-cli-id")) == (401, {"detail": "Invalid or unauthorized auth header"})
    assert get(path, {**cli(owner), "X-Web-Auth-Id": "no-such-web-id"}) == (
        401, {"detail": "Invalid or unauthorized auth header"})  # the web id decides
    assert get(path, {"X-Popcorn-Cli-Id": ""}) == (400, {"detail": "Missing X-Web-Auth-Id or X-Popcorn-Cli-Id header"})
    assert get("/user/submissions/999999999999999999", cli(owner)) == (404, {"detail": "Submission not found"})
    assert get(f"/user/submissions/0{submission_id}", cli(owner))[0] == 200  # an int, as the route parses it
    assert get(path, {**cli(owner), "X-Web-Auth-Id": ""})[0] == 200  # an empty web id counts as absent
