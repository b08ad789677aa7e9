"""Closed leaderboards with invites, and visibility changes (docs/http-api.md "Admin routes", "Submitting")
through real HTTP, as popcorn-cli's `admin generate-invites`, `join` and `submit` use them."""

from __future__ import annotations

from tests.gateway.admission import admin, fresh_board, web_user
from tests.gateway.conftest import CODE, cli, new_user

NO_ACCESS = {"detail": "You do not have access to this leaderboard"}


def join(platform, cli_id: str, body) -> tuple[int, dict]:
    response = platform.http.post("/user/join", headers=cli(cli_id), json=body)
    return response.status_code, response.json()


def listed_task(platform, board: str, headers: dict) -> dict:
    [found] = [b for b in platform.http.get("/leaderboards", headers=headers).json() if b["name"] == board]
    assert "secret_seed" not in found and "secret_seed" not in found["task"]
    return found["task"]


def test_an_invite_opens_a_closed_board_to_its_claimant_until_revoked(gateway):
    user_id, cli_id = new_user(gateway)
    board = fresh_board(gateway, "invite-only", visibility="closed")
    assert gateway.submit(cli_id, board, "null", "test", CODE).json() == NO_ACCESS
    assert listed_task(gateway, board, cli(cli_id)) == {}

    created = admin(gateway, "POST", "/admin/invites", json={"leaderboards": [board.upper(), "open"], "count": 2})
    assert created.status_code == 200, created.text
    codes = created.json()["codes"]
    assert created.json() == {"status": "ok", "leaderboards": [board, "open"], "codes": codes}
    assert len(set(codes)) == 2 and all(len(code) >= 22 for code in codes)  # 128 random bits, URL-safe

    assert join(gateway, cli_id, {"code": codes[0]}) == (200, {"status": "ok", "leaderboards": sorted([board, "open"])})
    assert join(gateway, cli_id, {"code": codes[0]}) == (200, {"status": "ok", "leaderboards": sorted([board, "open"])})
    _, other_cli = new_user(gateway)
    assert join(gateway, other_cli, {"code": codes[0]}) == (
        400, {"detail": "This invite code has already been claimed"})

    invites = admin(gateway, "GET", f"/admin/leaderboards/{board}/invites").json()
    assert invites["status"] == "ok" and invites["leaderboard"] == board
    claimed = {i["code"]: i for i in invites["invites"]}
    assert set(claimed) == set(codes)
    assert claimed[codes[0]]["user_id"] == user_id and claimed[codes[0]]["user_name"] == f"user{user_id}"
    assert claimed[codes[0]]["claimed_at"].endswith("Z") and claimed[codes[0]]["created_at"].endswith("Z")
    assert claimed[codes[1]]["user_id"] is None and claimed[codes[1]]["claimed_at"] is None

    assert gateway.http.get(f"/gpus/{board}", headers=cli(cli_id)).json() == ["null"]
    assert listed_task(gateway, board, cli(cli_id))["lang"] == "py"
    assert listed_task(gateway, board, cli(other_cli)) == {}
    accepted = gateway.submit(cli_id, board, "null", "test", CODE)
    assert accepted.status_code == 202, accepted.text
    assert gateway.wait_done(cli_id, accepted.json()["details"]["id"])["job"]["status"] == "succeeded"

    revoked = admin(gateway, "DELETE", f"/admin/invites/{codes[0]}")
    assert revoked.json() == {"status": "ok", "code": codes[0], "was_claimed": True}
    assert gateway.http.get(f"/gpus/{board}", headers=cli(cli_id)).json() == NO_ACCESS
    assert gateway.submit(cli_id, board, "null", "test", CODE).json() == NO_ACCESS
    assert admin(gateway, "DELETE", f"/admin/invites/{codes[1]}").json()["was_claimed"] is False
    gone = admin(gateway, "DELETE", f"/admin/invites/{codes[0]}")
    assert (gone.status_code, gone.json()) == (404, {"detail": "Invalid invite code"})
    assert join(gateway, other_cli, {"code": codes[1]}) == (400, {"detail": "Invalid invite code"})


def test_closed_boards_refuse_web_identities_even_with_an_invite(gateway):
    board = fresh_board(gateway, "cli-only", visibility="closed")
    user_id = str(90_000 + len(board))
    web_id = web_user(gateway, user_id)
    [code] = admin(gateway, "POST", "/admin/invites", json={"leaderboard": board, "count": 1}).json()["codes"]
    assert join(gateway, f"cli-{user_id}", {"code": code})[0] == 200

    refused = gateway.http.post(f"/submission/{board}/null/test", headers={"X-Web-Auth-Id": web_id},
                                files={"file": ("k.py", CODE.encode())})

    assert (refused.status_code, refused.json()) == (
        403, {"detail": "Closed leaderboards only accept submissions via CLI"})
    assert gateway.submit(f"cli-{user_id}", board, "null", "test", CODE).status_code == 202
    # join is CLI-only: a web identity alone counts as a missing header
    web_join = gateway.http.post("/user/join", headers={"X-Web-Auth-Id": web_id}, json={"code": code})
    assert (web_join.status_code, web_join.json()) == (400, {"detail": "Missing X-Popcorn-Cli-Id header"})


def test_bad_invite_and_join_requests(gateway):
    _, cli_id = new_user(gateway)
    for body in (None, [], {"code": 5}, {"codes": "x"}, "code"):
        assert join(gateway, cli_id, body) == (400, {"detail": "Missing required field: code"}), body
    assert join(gateway, cli_id, {"code": "no-such-code"}) == (400, {"detail": "Invalid invite code"})
    assert join(gateway, cli_id, {"code": "a\u0000b"}) == (400, {"detail": "Invalid invite code"})
    count_error = {"detail": "count must be an integer between 1 and 10000"}
    for body, status, detail in (
        ({"leaderboards": ["open"], "count": 0}, 400, count_error),
        ({"leaderboards": ["open"], "count": 10001}, 400, count_error),
        ({"leaderboards": ["open"], "count": "2"}, 400, count_error),
        ({"leaderboards": ["open"]}, 400, count_error),
        ({"count": 1}, 400, {"detail": "Must provide 'leaderboards' list or 'leaderboard' string"}),
        ({"leaderboards": [], "count": 1}, 400, {"detail": "Must provide 'leaderboards' list or 'leaderboard' string"}),
        ({"leaderboards": ["open", "nope"], "count": 1}, 404, {"detail": "Leaderboard `nope` does not exist."}),
    ):
        response = admin(gateway, "POST", "/admin/invites", json=body)
        assert (response.status_code, response.json()) == (status, detail), body
    listing = admin(gateway, "GET", "/admin/leaderboards/nope/invites")
    assert listing.status_code == 404


def test_visibility_changes_close_and_reopen_a_board(gateway):
    _, cli_id = new_user(gateway)
    board = fresh_board(gateway, "shy")

    closed = admin(gateway, "POST", f"/admin/leaderboards/{board.upper()}/visibility", json={"visibility": "closed"})
    assert closed.json() == {"status": "ok", "leaderboard": board, "visibility": "closed"}
    assert gateway.http.get(f"/gpus/{board}").status_code == 401
    assert gateway.submit(cli_id, board, "null", "test", CODE).json() == NO_ACCESS
    assert admin(gateway, "POST", f"/admin/leaderboards/{board}/visibility",
                 json={"visibility": "public"}).status_code == 200
    assert gateway.http.get(f"/gpus/{board}").json() == ["null"]
    assert gateway.submit(cli_id, board, "null", "test", CODE).status_code == 202

    for body in ({"visibility": "hidden"}, {}, None, ["closed"]):
        bad = admin(gateway, "POST", f"/admin/leaderboards/{board}/visibility", json=body)
        assert (bad.status_code, bad.json()) == (400, {"detail": "visibility must be 'public' or 'closed'"})
    unknown = admin(gateway, "POST", "/admin/leaderboards/nope/visibility", json={"visibility": "closed"})
    assert (unknown.status_code, unknown.json()) == (404, {"detail": "Leaderboard `nope` does not exist."})
