"""Per-leaderboard rate limits (docs/http-api.md "Admin routes", "Submitting") through real HTTP: the admin routes, the
429 with its retry time, categories, and one atomic decision under parallel requests."""

from __future__ import annotations

import asyncio
import re
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from schemas.events import SubmissionReceived
from services.kit.bus import publish_all
from tests.gateway.admission import admin, fresh_board
from tests.gateway.conftest import CODE, cli, new_user
from tests.support.events import archived
from tests.support.platform import Platform


@pytest.fixture(scope="module")
def gateway(gateway_processes: Platform) -> Platform:
    """Every service a subprocess here: these tests need the gateway on a port (tests/gateway/conftest.py)."""
    return gateway_processes


RETRY = re.compile(r"Rate limit exceeded: 2/2 test submissions per hour\. Try again in (\d+)s\.")


def limit(platform, board: str, category: str, most) -> httpx.Response:
    return admin(platform, "PUT", f"/admin/leaderboards/{board}/rate-limits",
                 json={"mode_category": category, "max_submissions_per_hour": most})


def test_a_limit_is_set_listed_enforced_with_a_retry_time_and_cleared(gateway):
    _, cli_id = new_user(gateway)
    board = fresh_board(gateway, "limited")

    created = limit(gateway, board.upper(), "test", 2)
    assert created.status_code == 200, created.text
    rate_limit = created.json()["rate_limit"]
    assert created.json() == {"status": "ok", "rate_limit": {
        "id": rate_limit["id"], "leaderboard_id": rate_limit["leaderboard_id"], "leaderboard_name": board,
        "mode_category": "test", "max_submissions_per_hour": 2}}
    assert isinstance(rate_limit["id"], int) and isinstance(rate_limit["leaderboard_id"], int)
    assert admin(gateway, "GET", f"/admin/leaderboards/{board}/rate-limits").json() == {
        "status": "ok", "leaderboard": board, "rate_limits": [rate_limit]}

    # test, benchmark and profile share the `test` category
    assert gateway.submit(cli_id, board, "null", "test", CODE).status_code == 202
    assert gateway.submit(cli_id, board, "null", "benchmark", CODE).status_code == 202
    for refused in (gateway.submit(cli_id, board, "null", "profile", CODE),
                    gateway.http.post(f"/{board}/null/test", headers=cli(cli_id),
                                      files={"file": ("k.py", CODE.encode())})):
        assert refused.status_code == 429, refused.text
        seconds = int(RETRY.fullmatch(refused.json()["detail"]).group(1))
        assert 3590 <= seconds <= 3600
        assert refused.headers["retry-after"] == str(seconds)
    # another user and another category are not affected
    assert gateway.submit(new_user(gateway)[1], board, "null", "test", CODE).status_code == 202
    assert gateway.submit(cli_id, board, "null", "leaderboard", CODE).status_code == 202

    cleared = admin(gateway, "DELETE", f"/admin/leaderboards/{board}/rate-limits/test")
    assert cleared.json() == {"status": "ok", "leaderboard": board, "mode_category": "test"}
    assert admin(gateway, "GET", f"/admin/leaderboards/{board}/rate-limits").json()["rate_limits"] == []
    assert gateway.submit(cli_id, board, "null", "test", CODE).status_code == 202
    again = admin(gateway, "DELETE", f"/admin/leaderboards/{board}/rate-limits/test")
    assert (again.status_code, again.json()) == (
        404, {"detail": f"No rate limit found for '{board}' with category 'test'"})


def test_zero_disables_a_category_without_a_retry_time(gateway):
    _, cli_id = new_user(gateway)
    board = fresh_board(gateway, "disabled")
    assert limit(gateway, board, "leaderboard", 0).status_code == 200

    refused = gateway.submit(cli_id, board, "null", "leaderboard", CODE)

    assert (refused.status_code, refused.json()) == (429, {"detail": (
        "Rate limit exceeded: 0/0 leaderboard submissions per hour. Submissions of this kind are currently disabled "
        "for this leaderboard.")})
    assert "retry-after" not in refused.headers
    assert gateway.submit(cli_id, board, "null", "test", CODE).status_code == 202


def test_parallel_requests_cannot_both_take_the_last_slot(gateway):
    _, cli_id = new_user(gateway)
    board = fresh_board(gateway, "race")
    assert limit(gateway, board, "test", 1).status_code == 200

    def submit(_: int) -> int:
        with httpx.Client(base_url=gateway.url, timeout=30) as client:
            return client.post(f"/submission/{board}/null/test", headers=cli(cli_id),
                               files={"file": ("k.py", CODE.encode())}).status_code

    with ThreadPoolExecutor(6) as pool:
        statuses = sorted(pool.map(submit, range(6)))

    assert statuses == [202, 429, 429, 429, 429, 429]


def test_bad_rate_limit_requests(gateway):
    board = fresh_board(gateway, "bad-limits")
    for category, most, detail in (
        ("benchmark", 3, "mode_category must be 'test' or 'leaderboard'"),
        (None, 3, "mode_category must be 'test' or 'leaderboard'"),
        ("test", -1, "max_submissions_per_hour must be a non-negative integer"),
        ("test", 1.5, "max_submissions_per_hour must be a non-negative integer"),
        ("test", True, "max_submissions_per_hour must be a non-negative integer"),
        ("test", "3", "max_submissions_per_hour must be a non-negative integer"),
    ):
        response = limit(gateway, board, category, most)
        assert (response.status_code, response.json()) == (400, {"detail": detail})
    bad_delete = admin(gateway, "DELETE", f"/admin/leaderboards/{board}/rate-limits/benchmark")
    assert (bad_delete.status_code, bad_delete.json()) == (400, {"detail": "mode_category must be 'test' or "
                                                                           "'leaderboard'"})
    unknown = {"detail": "Leaderboard `nope` does not exist."}
    for method, path in (("GET", "/admin/leaderboards/nope/rate-limits"),
                         ("DELETE", "/admin/leaderboards/nope/rate-limits/test")):
        response = admin(gateway, method, path)
        assert (response.status_code, response.json()) == (404, unknown)
    assert limit(gateway, "nope", "test", 1).status_code == 404


def test_the_dispatcher_counts_atomically_when_submissions_arrive_together(gateway):
    """Published straight to the bus, past any gateway check: the dispatcher's workers take them in parallel, and
    its count under the category's lock still lets exactly the allowed number through."""
    user_id, _ = new_user(gateway)
    board = fresh_board(gateway, "burst")
    assert limit(gateway, board, "test", 2).status_code == 200
    first = 800_000 + int(user_id) * 10
    burst = [SubmissionReceived(submission_id=first + i, leaderboard=board, gpus=["null"], mode="test",
                                user_id=user_id, user_name=f"user{user_id}", file_name="k.py", code=CODE,
                                correlation_id=str(first + i)) for i in range(8)]

    asyncio.run(publish_all(gateway.nats_url, burst))

    gateway.wait_for(lambda: len(decisions(gateway, "SubmissionAccepted", first)) +
                     len(decisions(gateway, "SubmissionRejected", first)) == 8, "every decision")
    refused = decisions(gateway, "SubmissionRejected", first)
    assert len(refused) == 6 and {r["status_code"] for r in refused} == {429}
    assert all(RETRY.fullmatch(r["reason"]) and r["retry_after_s"] >= 3590 for r in refused)


def decisions(platform, event_type: str, first: int) -> list[dict]:
    return [r for r in archived(platform.database_url, event_type) if first <= r["submission_id"] < first + 8]
