"""Admission rules of docs/http-api.md "Submitting" through real HTTP on both submit routes, and the dispatcher's
authoritative decision on a submission that never passed the gateway."""

from __future__ import annotations

import asyncio

from schemas.events import SubmissionReceived
from services.kit.bus import publish_all
from tests.gateway.admission import ADMIN, admin, fresh_board
from tests.gateway.conftest import CODE, cli, new_user
from tests.support.events import archived

CLOSED_INTAKE = "The bot is currently not accepting any new submissions, please try again later."
BANNED = "You are banned from making submissions."


def both_routes(platform, cli_id: str, board: str, code: str = CODE, file_name: str = "k.py") -> list:
    """The background and the streaming submit of the same file."""
    files = {"file": (file_name, code.encode())}
    return [platform.http.post(path, headers=cli(cli_id), files=files, timeout=60)
            for path in (f"/submission/{board}/null/test", f"/{board}/null/test")]


def assert_refused(responses, status: int, detail: str) -> None:
    for response in responses:
        assert (response.status_code, response.json()) == (status, {"detail": detail}), response.text


def test_the_kill_switch_closes_intake_on_both_routes_and_reopens_it(gateway):
    _, cli_id = new_user(gateway)
    # popcorn-cli sends these with Content-Length 0 and no Content-Type
    stopped = gateway.http.post("/admin/stop", headers={**ADMIN, "Content-Length": "0"})
    try:
        assert (stopped.status_code, stopped.json()) == (200, {"status": "ok", "accepts_jobs": False})
        assert_refused(both_routes(gateway, cli_id, "open"), 503, CLOSED_INTAKE)
    finally:
        started = gateway.http.post("/admin/start", headers=ADMIN)
    assert started.json() == {"status": "ok", "accepts_jobs": True}
    assert gateway.submit(cli_id, "open", "null", "test", CODE).status_code == 202
    assert archived(gateway.database_url, "IntakePaused") and archived(gateway.database_url, "IntakeResumed")


def test_a_ban_refuses_submissions_until_lifted(gateway):
    user_id, cli_id = new_user(gateway)

    banned = admin(gateway, "POST", f"/admin/ban/{user_id}")
    assert banned.json() == {"status": "ok", "user_id": user_id, "banned": True}
    # the ban comes before the mode and the leaderboard (docs/http-api.md "Submitting": the order)
    assert_refused(both_routes(gateway, cli_id, "nope"), 403, BANNED)
    unbanned = admin(gateway, "DELETE", f"/admin/ban/{user_id}")
    assert unbanned.json() == {"status": "ok", "user_id": user_id, "banned": False}
    assert gateway.submit(cli_id, "open", "null", "test", CODE).status_code == 202
    for method in ("POST", "DELETE"):
        missing = admin(gateway, method, "/admin/ban/no-such-user")
        assert (missing.status_code, missing.json()) == (404, {"detail": "User no-such-user not found"})


def test_the_dispatcher_rejects_a_banned_users_submission_published_directly(gateway):
    user_id, cli_id = new_user(gateway)
    assert admin(gateway, "POST", f"/admin/ban/{user_id}").status_code == 200
    submission_id = 900_000 + int(user_id)
    received = SubmissionReceived(submission_id=submission_id, leaderboard="open", gpus=["null"], mode="test",
                                  user_id=user_id, user_name=f"user{user_id}", file_name="k.py", code=CODE,
                                  origin="discord", correlation_id=str(submission_id))

    asyncio.run(publish_all(gateway.nats_url, [received]))

    gateway.wait_for(lambda: gateway.http.get(f"/user/submissions/{submission_id}", headers=cli(cli_id))
                     .status_code == 200, "the submission to be recorded")
    view = gateway.wait_done(cli_id, submission_id, timeout=30)
    assert view["job"]["status"] == "failed" and view["job"]["error"] == BANNED
    [rejected] = archived(gateway.database_url, "SubmissionRejected", str(submission_id))
    assert (rejected["status_code"], rejected["reason"]) == (403, BANNED)
    assert archived(gateway.database_url, "SubmissionAccepted", str(submission_id)) == []


def test_popcorn_directives_are_honoured_on_both_routes(gateway):
    _, cli_id = new_user(gateway)
    mismatch = "#!POPCORN leaderboard vectoradd\n#!POPCORN gpu H100\n" + CODE
    assert_refused(both_routes(gateway, cli_id, "open", mismatch), 400,
                   "Leaderboard name `open` specified in the command doesn't match the one in the submission "
                   "script header `vectoradd`.")
    assert_refused(both_routes(gateway, cli_id, "open", "#!POPCORN leaderboard\n" + CODE), 400,
                   "!POPCORN directive missing argument: #!POPCORN leaderboard")
    # case-insensitive match; the gpus directive is ignored (the path names the GPU)
    matching = "#!POPCORN leaderboard Open\n#!POPCORN gpus H100\n" + CODE
    assert gateway.submit(cli_id, "open", "null", "test", matching).status_code == 202


def test_work_on_another_stream_is_a_400(gateway):
    _, cli_id = new_user(gateway)
    side = CODE + "\ns = torch.cuda.Stream()\n"
    refused = gateway.submit(cli_id, "open", "null", "test", side)
    assert refused.status_code == 400 and refused.json()["detail"].startswith(
        "Your code contains work on another stream.")
    allowed = CODE + "\n# upstream: reads torch.cuda.current_stream() only\n"
    assert gateway.submit(cli_id, "open", "null", "test", allowed).status_code == 202


def test_the_deadline_refuses_late_submissions_but_not_the_admin_route(gateway):
    _, cli_id = new_user(gateway)
    board = fresh_board(gateway, "late", past_deadline=True)

    late = gateway.submit(cli_id, board, "null", "test", CODE)
    assert late.status_code == 400
    assert late.json()["detail"].startswith(f"The deadline to submit to {board} has passed.\nIt was ")

    on_behalf = gateway.http.post(f"/admin/submission/{board}/null/test", files={"file": ("k.py", CODE.encode())},
                                  headers={**ADMIN, **cli(cli_id)})
    assert on_behalf.status_code == 202, on_behalf.text
    submission_id = on_behalf.json()["details"]["id"]
    assert gateway.wait_done(cli_id, submission_id)["job"]["status"] == "succeeded"
    # the admin route checks the user like any submit route
    no_user = gateway.http.post(f"/admin/submission/{board}/null/test", files={"file": ("k.py", CODE.encode())},
                                headers=ADMIN)
    assert (no_user.status_code, no_user.json()) == (400, {"detail": "Missing X-Web-Auth-Id or X-Popcorn-Cli-Id "
                                                                     "header"})
    assert gateway.http.post(f"/admin/submission/{board}/null/test", files={"file": ("k.py", CODE.encode())},
                             headers=cli(cli_id)).status_code == 401
