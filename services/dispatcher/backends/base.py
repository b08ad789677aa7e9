"""The backend interface: launch a run, watch it to its end, cancel it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from schemas.contracts import FullResult, RunPayload
from schemas.events import RunFailureReason


@dataclass(frozen=True)
class JobLost:
    """The backend could not give a result; `retryable` failures are relaunched up to a bound."""

    reason: RunFailureReason
    detail: str
    retryable: bool = False


class LaunchError(Exception):
    """The backend refused or failed to start the job."""


class Backend(Protocol):
    name: str

    async def launch(self, payload: RunPayload) -> str:
        """Start the job; returns the backend's job reference, enough to find the job again after a restart."""

    async def wait(self, job_ref: str, timeout_s: float) -> FullResult | JobLost:
        """Watch the job to its end (cancelling it past `timeout_s` since launch) and collect the result."""

    async def cancel(self, job_ref: str) -> None:
        """Stop the job if it still runs."""
