"""`GET /user/submissions/{id}`, popcorn-cli's poll, answered in one module: the fast path and the route.

A submit loop polls every 5 s for every running submission; FastAPI's routing, dependency solving and response
validation cost more than the answer, and the route reads the caller, the submission, its runs and its queue in four
round trips. The fast path (`PollFastPath`) reads them in one (poll_reads.POLL) and answers only the plain case: a
known CLI id (no web id, which would decide instead), a submission that exists and is the caller's, and a read that is
not held (long_poll.py). Everything else (unknown caller, someone else's or no submission, a poll loop to hold, any
error) goes on to the route below (`show_submission`), which answers it as it always did. The fast path's body is the
route's: the same view, serialized the way FastAPI serializes the route's `dict`.
"""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime

from fastapi import APIRouter
from pydantic import TypeAdapter
from starlette.types import Scope, Send

from services.core.presentation import views
from services.core.readmodel import poll_reads, queue_reads, submission_reads
from services.gateway.deps import CurrentUser, Pool, Settings, State
from services.gateway.fastpaths import long_poll
from services.gateway.fastpaths.base import FastPath
from services.gateway.policy.ownership import owned
from services.gateway.responses import Submission, documents

log = logging.getLogger("kernelbot.gateway.polls")

ROUTE = "/user/submissions/{submission_id}"
PATH = re.compile(r"^/user/submissions/([0-9]{1,18})$")  # larger ids (and anything else): the route decides
BODY = TypeAdapter(dict)  # what FastAPI serializes a route's `-> dict` with

router = APIRouter()


def caller(scope: Scope) -> str | None:
    """The CLI id when it alone identifies the caller (docs/http-api.md "Credentials"): present, and no web id. Headers are read
    as the route reads them: the first of each name, latin-1, empty counts as absent."""
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
    """The route's view (`view` below) from a POLL row."""
    gpu = row["gpus"][0] if row["gpus"] else ""
    found = None if row["gpu"] is None else (row["gpu"], row, True)
    return views.submission(row, poll_reads.poll_runs(row), views.runner_queue(gpu, found))


async def view(pool, submission_id: int, user_id: str) -> dict:
    """One submission with its runs and its place in the queue, read the route's way (four reads)."""
    row = await owned(pool, submission_id, user_id, "view")
    runs = await submission_reads.submission_runs(pool, submission_id)
    gpu = row["gpus"][0] if row["gpus"] else ""
    return views.submission(row, runs, views.runner_queue(gpu, await queue_reads.queue(pool, gpu, submission_id)))


@router.get(ROUTE, description=long_poll.__doc__, responses=documents(Submission))
async def show_submission(submission_id: int, user: CurrentUser, pool: Pool, settings: Settings,
                          state: State) -> dict:
    """One submission with its runs. A poll of popcorn-cli's submit loop is held until the submission is done
    (at most `long_poll_s`); any other read is answered at once (docs/polling.md)."""
    answer = await view(pool, submission_id, user.user_id)
    if long_poll.holds(state, settings, user.user_id, submission_id, answer, datetime.now(UTC)):
        answer = await long_poll.hold_until_done(lambda: view(pool, submission_id, user.user_id),
                                                 lambda: state.waiter.changed(submission_id), settings.long_poll_s)
    state.poll_memory.answered(user.user_id, submission_id, datetime.now(UTC), answer["done"])
    return answer


class PollFastPath(FastPath):
    async def answered(self, scope: Scope, send: Send) -> bool:
        match = PATH.match(scope["path"])
        if match is None:
            return False
        cli_id = caller(scope)
        if cli_id is None:
            return False
        state, submission_id = self.state, int(match.group(1))
        try:
            row = await poll_reads.poll(state.pool, cli_id, submission_id)
        except Exception:  # the route meets the same trouble and answers it the usual way
            log.debug("poll fast path fell back to the route", exc_info=True)
            return False
        if row is None or row["id"] is None or str(row["user_id"]) != str(row["caller_id"]):
            return False  # 401, 404, 403: the route's answers
        answer = view_of(row)
        user_id = str(row["caller_id"])
        if long_poll.holds(state, state.settings, user_id, submission_id, answer, datetime.now(UTC)):
            return False  # the route holds it
        body = BODY.dump_json(answer)
        state.poll_memory.answered(user_id, submission_id, datetime.now(UTC), answer["done"])
        await self.reply(scope, send, ROUTE, 200, [(b"content-length", str(len(body)).encode()),
                                                   (b"content-type", b"application/json")], body)
        return True
