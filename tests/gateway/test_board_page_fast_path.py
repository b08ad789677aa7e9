"""A public board's web page for someone not signed in, answered in front of the application
(services/gateway/fastpaths/board_pages.py): the route's very page, as fresh as a ranking, and nothing else.

The route hands a browser without one a form-token cookie; the fast path does not (its page holds no form), so a
response without `set-cookie` is the fast path's."""

from __future__ import annotations

import re

from tests.gateway.admission import fresh_board
from tests.gateway.conftest import CODE, new_user


def ranked(platform, board: str, cli_id: str) -> int:
    submission_id = platform.submit(cli_id, board, "null", "leaderboard", CODE).json()["details"]["id"]
    assert platform.wait_done(cli_id, submission_id)["job"]["status"] == "succeeded"
    return submission_id


def page_requests(platform) -> float:
    text = platform.http.get("/metrics").text
    found = re.search(r'^kb_http_request_seconds_count\{method="GET",route="/web/leaderboards/\{name\}",'
                      r'status="200"\} ([0-9.e+]+)$', text, flags=re.M)
    return float(found.group(1)) if found else 0.0


def test_an_anonymous_page_is_the_routes_page_and_follows_the_standings(gateway):
    board = fresh_board(gateway, "front-page")
    _, cli_id = new_user(gateway)
    ranked(gateway, board, cli_id)
    counted = page_requests(gateway)
    gateway.http.cookies.clear()  # a browser on its first visit (the client keeps what earlier tests were handed)
    fast = gateway.http.get(f"/web/leaderboards/{board}?gpu=null")
    gateway.http.cookies.clear()
    routed = gateway.http.get(f"/web/leaderboards/{board}?gpu=null", headers={"Cookie": "kb_session=not-a-session"})
    gateway.http.cookies.clear()
    assert fast.status_code == routed.status_code == 200
    assert "set-cookie" not in fast.headers and "set-cookie" in routed.headers
    assert fast.text == routed.text  # the same page, to the byte (both drawn within the same minute)
    for name in ("content-security-policy", "x-content-type-options", "referrer-policy", "cache-control",
                 "content-type"):
        assert fast.headers[name] == routed.headers[name], name
    assert page_requests(gateway) == counted + 2

    _, second_cli = new_user(gateway)
    ranked(gateway, board, second_cli)  # done: its score is projected, so the next read must show it
    assert gateway.http.get(f"/web/leaderboards/{board}").text.count('<tr class="entry">') == 2


def test_what_only_the_route_may_answer_goes_to_the_route(gateway):
    closed = fresh_board(gateway, "front-page-closed", visibility="closed")
    hidden = gateway.http.get(f"/web/leaderboards/{closed}")
    assert hidden.status_code == 404 and "There is no leaderboard named" in hidden.text
    board = fresh_board(gateway, "front-page-other")
    elsewhere = gateway.http.get(f"/web/leaderboards/{board}?gpu=B300")
    assert elsewhere.status_code == 404 and "is not run on B300" in elsewhere.text
    assert gateway.http.get("/web/leaderboards/no-such-board").status_code == 404
    for url in (f"/web/leaderboards/{board}?gpu=null&gpu=null", f"/web/leaderboards/{board}?gpu=null&x=1"):
        gateway.http.cookies.clear()
        answer = gateway.http.get(url)
        assert answer.status_code == 200 and "set-cookie" in answer.headers, url  # the route's page
