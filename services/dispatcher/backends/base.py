"""The backend interface: launch a run (idempotently), poll it, cancel it; the result comes with the last poll.

The scheduler owns the loop, the clock and the retries; a backend only speaks to its scheduler of jobs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Protocol

from schemas.contracts import FullResult, RunPayload
from schemas.events import RunFailureReason


@dataclass(frozen=True)
class JobLost:
    """The backend could not give a result; `retryable` failures are relaunched up to a bound."""

    reason: RunFailureReason
    detail: str
    retryable: bool = False


class _Pending:
    def __repr__(self) -> str:
        return "PENDING"


PENDING: Final = _Pending()
"""What `poll` returns while the job is queued or running."""

Outcome = FullResult | JobLost | _Pending


class LaunchError(Exception):
    """The backend refused or failed to start the job."""


class BackendUnavailable(Exception):
    """The backend could not be asked right now (network, 5xx, a rate limit); asking again later may work.

    `retry_after_s`: how long the backend asked us to wait before asking again (a 429's `Retry-After`), when it said.
    """

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class Backend(Protocol):
    name: str
    # Seconds between two polls of one job.
    poll_interval_s: float

    async def launch(self, payload: RunPayload, launch_key: str) -> str:
        """Start the job, unless one with this `launch_key` exists already: then return that job's reference.

        The key is unique per run and attempt, so a dispatcher that died between launching and recording the
        launch finds its job again instead of starting a second one. The reference is what is recorded in
        `RunDispatched`: enough to poll, collect and cancel the job from any process.
        """

    async def poll(self, job_ref: str) -> Outcome:
        """PENDING while the job runs; its FullResult once finished; JobLost when no result will come."""

    async def cancel(self, job_ref: str) -> None:
        """Stop the job if it still runs."""
