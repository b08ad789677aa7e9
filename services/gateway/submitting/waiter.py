"""Waits for the ledger to project a change of one submission, whichever service's event it was: the dispatcher's
decision on a new submission (the submit answers with it), and a held poll answered the moment its submission is
done. (A change the front end publishes itself waits on the ledger's position instead:
services/core/infrastructure/position.py.)"""

from __future__ import annotations

import asyncio

from services.kit.listener import Listener

CHANNEL = "kb_submission"


class ProjectionWaiter:
    def __init__(self) -> None:
        self._waiting: dict[int, asyncio.Future] = {}
        self._watching: dict[int, set[asyncio.Future]] = {}

    def subscribe(self, listener: Listener) -> None:
        listener.subscribe(CHANNEL, self._notified, self._release_all)

    def _notified(self, payload: str) -> None:
        submission_id = int(payload)
        future = self._waiting.pop(submission_id, None)
        for waiter in [future, *self._watching.pop(submission_id, ())]:
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    def _release_all(self) -> None:
        # notifications were lost with the connection: answer the waiting clients rather than make them time out
        for future in [*self._waiting.values(), *(w for group in self._watching.values() for w in group)]:
            if not future.done():
                future.set_result(None)
        self._waiting.clear()
        self._watching.clear()

    def changed(self, submission_id: int) -> asyncio.Future:
        """A future resolved on the submission's next projected change; any number may watch one submission.
        Cancelling it (when its holder gives up) forgets it."""
        future = asyncio.get_running_loop().create_future()
        watchers = self._watching.setdefault(submission_id, set())
        watchers.add(future)

        def forget(done: asyncio.Future) -> None:
            group = self._watching.get(submission_id)
            if group is not None:
                group.discard(done)
                if not group:
                    self._watching.pop(submission_id, None)

        future.add_done_callback(forget)
        return future

    def holding(self) -> int:
        return sum(len(group) for group in self._watching.values())

    def expect(self, submission_id: int) -> asyncio.Future:
        future = asyncio.get_running_loop().create_future()
        self._waiting[submission_id] = future
        return future

    async def wait(self, submission_id: int, future: asyncio.Future, timeout_s: float) -> bool:
        try:
            await asyncio.wait_for(future, timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            self._waiting.pop(submission_id, None)

    def stop(self) -> None:
        self._release_all()  # held polls are answered with what there is, not cut off
