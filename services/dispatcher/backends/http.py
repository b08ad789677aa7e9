"""One rule for the HTTP backends (Buildkite, Slurm): which answers mean "ask again later".

An HTTP API could not answer right now when the request did not reach it (network), when it asked us to slow down
(429), or when it answered with a server error (5xx): the dispatcher keeps the launch and asks again
(`BackendUnavailable`), no sooner than a 429 says (`Retry-After`, or Buildkite's `RateLimit-Reset`). Every other
status is an answer, and the backend reads it.

The one exception is declared by the backend, not by a different threshold: slurmrestd answers 500 to a request it
understood and refused (an invalid partition, a QOS violation, an unknown job id), with the reason in its body, so
the Slurm backend names 500 (and 501, a plugin slurmrestd was not built with) among its `answers` and turns them into a
refusal or a lost job; asking again would get the same answer. A 502, 503 or 504 from slurmrestd (or a proxy in front
of it) is still "ask again later".
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from services.dispatcher.backends.base import BackendUnavailable


def retry_after_s(response: httpx.Response) -> float | None:
    """How long a rate-limited answer asks us to wait: `Retry-After` in seconds (RFC 9110; an HTTP date is read
    too), else `RateLimit-Reset`, the seconds until the window resets (Buildkite's REST API); None when neither."""
    value = response.headers.get("retry-after") or response.headers.get("ratelimit-reset")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        try:
            return max((parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds(), 0.0)
        except (TypeError, ValueError):
            return None


def unavailable(status: int, answers: Collection[int] = ()) -> bool:
    """Whether this status means the API could not answer now (429 or a 5xx, except the API's own `answers`)."""
    return status not in answers and (status == 429 or status >= 500)


async def request(http: httpx.AsyncClient, who: str, method: str, path: str, *, answers: Collection[int] = (),
                  **kwargs: Any) -> httpx.Response:
    """Send one request; raise BackendUnavailable when `who` could not answer now, return the answer otherwise."""
    try:
        response = await http.request(method, path, **kwargs)
    except httpx.HTTPError as exc:
        raise BackendUnavailable(f"{who} is unreachable: {exc}") from exc
    if unavailable(response.status_code, answers):
        raise BackendUnavailable(f"{who} answered {response.status_code}: {response.text[:200]}",
                                 retry_after_s(response) if response.status_code == 429 else None)
    return response
