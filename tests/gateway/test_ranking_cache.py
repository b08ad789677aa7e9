"""The gateway's standings cache (services/gateway/fastpaths/standings_cache.py): a ranking is answered from memory while its
standings stand still, changes as soon as a new best is projected, and a closed board's cached ranking reaches only
those who may see it."""

from __future__ import annotations

import re

import pytest

from tests.gateway.admission import admin, fresh_board
from tests.gateway.conftest import CODE, cli, new_user
from tests.support.platform import Platform


@pytest.fixture(scope="module")
def gateway(gateway_processes: Platform) -> Platform:
    """Every service a subprocess here: these tests need the gateway on a port (tests/gateway/conftest.py)."""
    return gateway_processes



def cache_hits(platform) -> float:
    text = platform.http.get("/metrics").text
    found = re.search(r'^kb_standings_cache_total\{outcome="hit"\} ([0-9.e+]+)$', text, flags=re.M)
    return float(found.group(1)) if found else 0.0


def ranked(platform, board: str, cli_id: str) -> int:
    submission_id = platform.submit(cli_id, board, "null", "leaderboard", CODE).json()["details"]["id"]
    assert platform.wait_done(cli_id, submission_id)["job"]["status"] == "succeeded"
    return submission_id


def test_a_cached_ranking_changes_the_moment_a_new_best_is_projected(gateway):
    board = fresh_board(gateway, "cached")
    _, first_cli = new_user(gateway)
    first = ranked(gateway, board, first_cli)
    url = f"/submissions/{board}/null?limit=20"

    answer = gateway.http.get(url)
    assert answer.status_code == 200 and [r["submission_id"] for r in answer.json()] == [first]
    tag = answer.headers["etag"]
    assert answer.headers["cache-control"] == "no-cache"
    hits = cache_hits(gateway)
    again = gateway.http.get(url)
    assert (again.content, again.headers["etag"]) == (answer.content, tag)
    assert cache_hits(gateway) == hits + 1  # answered from memory, not recomputed
    unchanged = gateway.http.get(url, headers={"If-None-Match": tag})
    assert (unchanged.status_code, unchanged.content, unchanged.headers["etag"]) == (304, b"", tag)
    count = gateway.http.get(f"/submission_count/{board}/null")
    assert count.json() == {"count": 1}

    _, second_cli = new_user(gateway)
    second = ranked(gateway, board, second_cli)  # done: its score is projected, in stream order before the finish

    moved = gateway.http.get(url, headers={"If-None-Match": tag})
    assert moved.status_code == 200 and moved.headers["etag"] != tag
    assert [(r["submission_id"], r["rank"]) for r in moved.json()] == [(first, 1), (second, 1)]  # equal scores tie
    assert gateway.http.get(f"/submission_count/{board}/null").json() == {"count": 2}
    # a different page of the same standings is its own answer
    page = gateway.http.get(f"/submissions/{board}/null?limit=1&offset=1")
    assert [(r["submission_id"], r["rank"]) for r in page.json()] == [(second, 1)]
    assert page.headers["etag"] not in (tag, moved.headers["etag"])

    deleted = gateway.http.delete(f"/user/submissions/{second}", headers=cli(second_cli))
    assert deleted.status_code == 200, deleted.text
    assert [r["submission_id"] for r in gateway.http.get(url).json()] == [first]


def test_a_closed_boards_cached_ranking_is_refused_to_an_outsider(gateway):
    board = fresh_board(gateway, "cached-closed", visibility="closed")
    _, insider = new_user(gateway)
    [code] = admin(gateway, "POST", "/admin/invites", json={"leaderboard": board, "count": 1}).json()["codes"]
    assert gateway.http.post("/user/join", headers=cli(insider), json={"code": code}).status_code == 200
    submission = ranked(gateway, board, insider)
    url = f"/submissions/{board}/null"

    seen = gateway.http.get(url, headers=cli(insider))
    assert [r["submission_id"] for r in seen.json()] == [submission]
    assert seen.headers["cache-control"] == "private, no-cache"
    tag = seen.headers["etag"]
    hits = cache_hits(gateway)
    assert gateway.http.get(url, headers=cli(insider)).content == seen.content
    assert cache_hits(gateway) == hits + 1  # the ranking is in the cache now

    _, outsider = new_user(gateway)
    for headers, status in (({}, 401), (cli(outsider), 403)):
        for extra in ({}, {"If-None-Match": tag}):
            refused = gateway.http.get(url, headers={**headers, **extra})
            assert refused.status_code == status, refused.text
            assert "etag" not in refused.headers and str(submission) not in refused.text
        count = gateway.http.get(f"/submission_count/{board}/null", headers=headers)
        assert count.status_code == status and "count" not in count.json()
    assert cache_hits(gateway) == hits + 1  # nothing was served to them, from the cache or otherwise


def test_a_ranking_cached_while_public_is_refused_once_the_board_closes(gateway):
    board = fresh_board(gateway, "closing")
    _, member = new_user(gateway)
    ranked(gateway, board, member)
    url = f"/submissions/{board}/null?limit=20"
    cached = gateway.http.get(url)
    hits = cache_hits(gateway)
    assert gateway.http.get(url).content == cached.content and cache_hits(gateway) == hits + 1

    closing = admin(gateway, "POST", f"/admin/leaderboards/{board}/visibility", json={"visibility": "closed"})
    assert closing.status_code == 200, closing.text
    gateway.wait_for(lambda: gateway.http.get(f"/gpus/{board}").status_code == 401, "the board to close")

    for extra in ({}, {"If-None-Match": cached.headers["etag"]}):
        refused = gateway.http.get(url, headers=extra)
        assert refused.status_code == 401 and "etag" not in refused.headers
    assert gateway.http.get(f"/submission_count/{board}/null").status_code == 401
    assert cache_hits(gateway) == hits + 1


@pytest.mark.slow
def test_replicas_each_cache_and_each_sees_a_new_best_at_once(gateway, tmp_path):
    replica = Platform(gateway.nats_url, gateway.database_url, tmp_path)
    replica.start("gateway")
    try:
        board = fresh_board(gateway, "replicated")
        _, first_cli = new_user(gateway)
        first = ranked(gateway, board, first_cli)
        url = f"/submissions/{board}/null?limit=20"
        for each in (gateway, replica):
            each.http.get(url)  # fills each replica's own cache
            assert [r["submission_id"] for r in each.http.get(url).json()] == [first]
        [tag] = {each.http.get(url).headers["etag"] for each in (gateway, replica)}  # the same on every replica

        _, second_cli = new_user(gateway)
        second = ranked(gateway, board, second_cli)

        for each in (gateway, replica):
            moved = each.http.get(url, headers={"If-None-Match": tag})
            assert moved.status_code == 200
            assert [r["submission_id"] for r in moved.json()] == [first, second]
    finally:
        replica.stop()


def request_count(platform, route: str, status: int) -> float:
    text = platform.http.get("/metrics").text
    pattern = (r'^kb_http_request_seconds_count\{method="GET",route="' + re.escape(route) + r'",status="'
               + str(status) + r'"\} ([0-9.e+]+)$')
    found = re.search(pattern, text, flags=re.M)
    return float(found.group(1)) if found else 0.0


def test_a_ranking_answered_in_front_of_the_middleware_is_counted_and_kept_clean(gateway):
    """The fast paths run before the application's middleware: their answers still count under the route's
    template, and a URL that middleware cleans or refuses is still cleaned or refused."""
    board = fresh_board(gateway, "front")
    _, cli_id = new_user(gateway)
    ranked(gateway, board, cli_id)
    route = "/submissions/{leaderboard}/{gpu}"
    before = request_count(gateway, route, 200)
    for _ in range(3):
        assert gateway.http.get(f"/submissions/{board}/null?limit=20").status_code == 200
    assert request_count(gateway, route, 200) == before + 3

    plain = gateway.http.get(f"/submissions/{board}/null?limit=20").json()
    doubled = gateway.http.get(f"{gateway.url}//submissions/{board}/null?limit=20")  # full URL: test_public_routes.py
    assert doubled.status_code == 200 and doubled.json() == plain
    for url in (f"/submissions/{board}%00/null", f"/submissions/{board}/null?limit=20&x=%00"):
        refused = gateway.http.get(url)
        assert refused.status_code == 400
        assert refused.json() == {"detail": "Invalid request: the URL contains a NUL character"}


def test_the_web_page_shows_the_first_gpus_ranking_and_refuses_what_it_must(gateway):
    """The page reads its board and the standings' version in one round trip when the GPU is named, and the first
    GPU's version after it when not: both show the newest ranking; an unknown GPU or a closed board is not found."""
    board = fresh_board(gateway, "page")
    _, cli_id = new_user(gateway)
    ranked(gateway, board, cli_id)
    named = gateway.http.get(f"/web/leaderboards/{board}?gpu=null")
    first = gateway.http.get(f"/web/leaderboards/{board}")
    assert named.status_code == first.status_code == 200
    assert named.text.count('<tr class="entry">') == first.text.count('<tr class="entry">') == 1
    _, second_cli = new_user(gateway)
    ranked(gateway, board, second_cli)
    assert gateway.http.get(f"/web/leaderboards/{board}").text.count('<tr class="entry">') == 2
    elsewhere = gateway.http.get(f"/web/leaderboards/{board}?gpu=B300")
    assert elsewhere.status_code == 404 and "is not run on B300" in elsewhere.text
    closed = fresh_board(gateway, "page-closed", visibility="closed")
    hidden = gateway.http.get(f"/web/leaderboards/{closed}")
    assert hidden.status_code == 404 and "There is no leaderboard named" in hidden.text
