"""Long polling of `GET /user/submissions/{id}` for popcorn-cli's submit loop (docs/polling.md).

popcorn-cli (v1.3.23) polls a background submission at once after its POST and then 5 s after each answer, with a
30 s timeout per request. The gateway holds such a poll open until the submission is done (a terminal status) or
`long_poll_s` (20 s) passed, so the unchanged client prints the result the moment it exists instead of at its next
5 s tick. Answering early on pending -> running would only make it wait its 5 s again, so only `done` ends a hold.

Which GET is a poll loop (`is_poll_loop`): the submission is not done, and either
  * the request comes within FIRST_POLL_WINDOW_S of the submission's own POST (its `submitted_at`), by its owner:
    the first poll, which popcorn-cli sends right after the 202; or
  * this gateway last answered the same caller, for the same submission, 4 to 8 s before (POLL_GAP_S): the next
    tick of a loop sleeping 5 s between answers.
Everything else is a one-off read (`popcorn submissions show ID`, a script, the web page) and is answered at once.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from datetime import datetime

FIRST_POLL_WINDOW_S = 2.0
POLL_GAP_S = (4.0, 8.0)
REMEMBERED = 10_000  # (caller, submission) pairs kept for the gap rule; the oldest are forgotten first


def is_poll_loop(now: datetime, submitted_at: datetime | None, previous_answer: datetime | None) -> bool:
    """Whether a read of a submission that is not done continues popcorn-cli's poll loop (see module doc)."""
    if submitted_at is not None and 0 <= (now - submitted_at).total_seconds() <= FIRST_POLL_WINDOW_S:
        return True
    if previous_answer is not None:
        gap = (now - previous_answer).total_seconds()
        return POLL_GAP_S[0] <= gap <= POLL_GAP_S[1]
    return False


def holds(state, settings, caller: str, submission_id: int, view: dict, now: datetime) -> bool:
    """Whether the gateway holds this read of `view` (see module doc): not done, long polling on, room for one
    more held request, and a poll loop's read. `state` is the app's state (its waiter and poll memory)."""
    if view["done"] or settings.long_poll_s <= 0 or state.waiter.holding() >= settings.long_poll_max_held:
        return False
    submitted_at = datetime.fromisoformat(view["submission_time"]) if view.get("submission_time") else None
    return is_poll_loop(now, submitted_at, state.poll_memory.previous(caller, submission_id))


class PollMemory:
    """When this gateway last answered a caller about a submission that was not done yet (bounded, in memory: a
    poll that reaches another replica is answered at once, which is only slower)."""

    def __init__(self, size: int = REMEMBERED) -> None:
        self._answers: OrderedDict[tuple[str, int], datetime] = OrderedDict()
        self._size = size

    def previous(self, caller: str, submission_id: int) -> datetime | None:
        return self._answers.get((caller, submission_id))

    def answered(self, caller: str, submission_id: int, at: datetime, done: bool) -> None:
        key = (caller, submission_id)
        self._answers.pop(key, None)
        if not done:
            self._answers[key] = at
            while len(self._answers) > self._size:
                self._answers.popitem(last=False)


async def hold_until_done(read: Callable[[], Awaitable[dict]], changed: Callable[[], asyncio.Future],
                          budget_s: float) -> dict:
    """Read the view until it says `done` or `budget_s` passed. `changed()` gives a future that resolves on the
    submission's next change; it is taken before each read, so a change between read and wait is never missed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + budget_s
    while True:
        next_change = changed()
        try:
            view = await read()
            remaining = deadline - loop.time()
            if view["done"] or remaining <= 0:
                return view
            await asyncio.wait({next_change}, timeout=remaining)
        finally:
            next_change.cancel()
