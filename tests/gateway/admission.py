"""Helpers of the admission tests: admin calls, boards of their own, web identities."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from tests.support.platform import ADMIN_TOKEN, Platform, identity_board

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
_boards = itertools.count(1)


def admin(platform: Platform, method: str, path: str, **kwargs):
    return platform.http.request(method, path, headers=ADMIN, **kwargs)


def fresh_board(platform: Platform, prefix: str, *, visibility: str = "public", past_deadline: bool = False) -> str:
    """A board of the test's own on the fast `null` GPU, so counts and limits start from nothing."""
    name = f"{prefix}-{next(_boards)}"
    board = identity_board(name, ["null"], visibility)
    if past_deadline:
        board = board.model_copy(update={"deadline": datetime.now(UTC) - timedelta(days=1)})
    platform.add_boards(board)
    return name


def web_user(platform: Platform, user_id: str) -> str:
    """Registers a user with a web identity too; returns the web auth id."""
    web_id = f"web-{user_id}"
    response = admin(platform, "POST", "/admin/users",
                     json={"user_id": user_id, "user_name": f"user{user_id}", "cli_id": f"cli-{user_id}",
                           "web_auth_id": web_id})
    response.raise_for_status()
    platform.wait_for(lambda: platform.http.get("/user/submissions/0", headers={"X-Web-Auth-Id": web_id})
                      .status_code == 404, "web identity")
    return web_id
