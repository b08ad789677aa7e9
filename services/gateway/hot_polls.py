"""The hot path of popcorn-cli's poll, `GET /user/submissions/{id}` with `X-Popcorn-Cli-Id`: answered before routing.

A submit loop polls every 5 s for every running submission; FastAPI's routing, dependency solving and response
validation cost more than the answer, and the route reads the caller, the submission, its runs and its queue in four
round trips. This middleware reads them in one (poll_reads.POLL) and answers only the plain case: a known CLI id (no
web id, which would decide instead), a submission that exists and is the caller's, and a read that is not held
(services/gateway/long_poll.py). Everything else (unknown caller, someone else's or no submission, a poll loop to
hold, any error) goes on to the route in services/gateway/routes/user.py, which answers it as it always did. The
body is the route's: the same view, serialized the way FastAPI serializes the route's `dict`.
"""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime
from types import SimpleNamespace

from pydantic import TypeAdapter
from starlette.types import ASGIApp, Receive, Scope, Send

from services.core.presentation import views
from services.core.readmodel import poll_reads
from services.gateway import long_poll

log = logging.getLogger("kernelbot.gateway.polls")

PATH = re.compile(r"^/user/submissions/([0-9]{1,18})$")  # larger ids (and anything else): the route decides
ROUTE = SimpleNamespace(path="/user/submissions/{submission_id}")  # what request metrics label a hit with
BODY = TypeAdapter(dict)  # what FastAPI serializes a route's `-> dict` with


def caller(scope: Scope) -> str | None:
    """The CLI id when it alone identifies the caller (docs/http-api.md "Credentials"): present, and no web id. Headers
    are read as the route reads them: the first of each name, latin-1, empty counts as absent."""
    cli_id = web_id = None
    for key, value in scope.get("headers", ()):
        if key == b"x-popcorn-cli-id" and cli_id is None:
            cli_id = value
        elif key == b"x-web-auth-id" and web_id is None:
            web_id = value
    if web_id or not cli_id or b"\x00" in cli_id:
        return None
    return cli_id.decode("latin-1")


def view_of(row) -> dict:
    """The route's view (routes/user.py `_view`) from a POLL row."""
    gpu = row["gpus"][0] if row["gpus"] else ""
    found = None if row["gpu"] is None else (row["gpu"], row, True)
    return views.submission(row, poll_reads.poll_runs(row), views.runner_queue(gpu, found))


class HotPolls:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET" and await self._answered(scope, send):
            return
        await self.app(scope, receive, send)

    async def _answered(self, scope: Scope, send: Send) -> bool:
        match = PATH.match(scope["path"])
        if match is None:
            return False
        cli_id = caller(scope)
        state = scope["app"].state
        if cli_id is None or not hasattr(state, "poll_memory"):
            return False
        submission_id = int(match.group(1))
        try:
            row = await poll_reads.poll(state.pool, cli_id, submission_id)
        except Exception:  # the route meets the same trouble and answers it the usual way
            log.debug("poll fast path fell back to the route", exc_info=True)
            return False
        if row is None or row["id"] is None or str(row["user_id"]) != str(row["caller_id"]):
            return False  # 401, 404, 403: the route's answers
        view = view_of(row)
        user_id = str(row["caller_id"])
        if long_poll.holds(state, state.settings, user_id, submission_id, view, datetime.now(UTC)):
            return False  # the route holds it
        body = BODY.dump_json(view)
        state.poll_memory.answered(user_id, submission_id, datetime.now(UTC), view["done"])
        scope["route"] = ROUTE
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", str(len(body)).encode()), (b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})
        return True
