"""The SSE stream of a streamed submission (docs/http-api.md "The streaming submit"): framing, payloads and following
the job.

The job is followed by polling the read model, which is durable: a stream opened by any gateway replica, or still
open across a restart of the other services, sees the same states. The stream ends with exactly one `result` or
`error` event whatever happens; a client that goes away stops only the stream, never the job.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from services.core.presentation import reports
from services.core.presentation.results import RunOutcome

log = logging.getLogger("kernelbot.gateway")

STATUS_EVERY_S = 15.0
STREAM_LIMIT_S = 55 * 60.0
POLL_FIRST_S = 0.1
POLL_MAX_S = 1.0
# Consecutive failed reads of the read model tolerated (a database restart) before the stream gives up with a 500.
MAX_READ_FAILURES = 30
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
MEDIA_TYPE = "text/event-stream; charset=utf-8"


@dataclass(frozen=True)
class JobState:
    """What the stream needs to know of a submission at one moment."""

    deleted: bool
    done: bool
    rejected: bool
    job_status: str | None
    job_error: str | None


def frame(event: str, data: dict[str, Any]) -> bytes:
    """`event: <name>\\ndata: <json>\\n\\n` with single-line, ASCII-only JSON
    (docs/http-api.md "The streaming submit")."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=True, allow_nan=False)}\n\n".encode("ascii")


def status_message(submission_id: int, gpu: str, job_status: str, elapsed_s: float) -> str:
    doing = "queued" if job_status in ("initial", "pending") else job_status
    return f"Submission {submission_id} {doing} on {gpu} ({int(elapsed_s)}s elapsed)"


def status_event(submission_id: int, gpu: str, job_status: str, elapsed_s: float) -> bytes:
    return frame("status", {
        "status": "processing", "elapsed_time": round(elapsed_s, 2), "submission_id": submission_id,
        "job_status": job_status, "message": status_message(submission_id, gpu, job_status, elapsed_s),
    })


def error_event(submission_id: int, status_code: int, detail: str) -> bytes:
    return frame("error", {"status": "error", "detail": detail, "status_code": status_code,
                           "submission_id": submission_id})


def result_event(submission_id: int, job_status: str, outcomes: list[RunOutcome]) -> bytes:
    return frame("result", {
        "status": "success", "submission_id": submission_id, "job_status": job_status,
        "results": [o.result for o in outcomes],
        "reports": [reports.report(o.gpu, o.backend, o.mode, secret=o.secret, result=o.result) for o in outcomes],
    })


def final_event(submission_id: int, state: JobState, outcomes: list[RunOutcome]) -> bytes:
    """The terminal event of a deleted or finished submission (docs/http-api.md "The streaming submit")."""
    error = state.job_error or ""
    if state.deleted:
        return error_event(submission_id, 409, "Submission cancelled")
    if state.job_status == "hacked":
        return error_event(submission_id, 400, error or "Submission rejected by KernelGuard pre-check.")
    if state.job_status == "timed_out":
        return error_event(submission_id, 504, f"Submission {submission_id} timed out: "
                                               f"{error or 'hard timeout reached'}")
    if state.rejected:
        return error_event(submission_id, 400, error or "Submission rejected")
    if not any(o.completed for o in outcomes):
        return error_event(submission_id, 502, f"Execution backend error: {error or 'no run completed'}")
    return result_event(submission_id, state.job_status or "failed", outcomes)


async def follow(
    submission_id: int,
    gpu: str,
    read_state: Callable[[], Awaitable[JobState | None]],
    read_outcomes: Callable[[], Awaitable[list[RunOutcome]]],
    *,
    status_every_s: float = STATUS_EVERY_S,
    limit_s: float = STREAM_LIMIT_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    finish: Callable[[int, JobState, list[RunOutcome]], bytes] = final_event,
) -> AsyncIterator[bytes]:
    """Frames of one stream: a status at once and every `status_every_s`, then exactly one terminal event, which
    `finish` makes (the profile route's answer differs from the other modes')."""
    failures = 0

    async def poll(previous: JobState | None) -> JobState | None:
        nonlocal failures
        try:
            state = await read_state()
        except Exception:
            failures += 1
            if failures >= MAX_READ_FAILURES:
                raise
            log.warning("reading submission %s failed; retrying", submission_id, exc_info=True)
            return previous
        failures = 0
        return state

    try:
        started = clock()
        state = await poll(None)
        yield status_event(submission_id, gpu, (state and state.job_status) or "initial", 0.0)
        next_status, delay = started + status_every_s, POLL_FIRST_S
        while True:
            if state is not None and (state.deleted or state.done):
                outcomes = [] if state.deleted else await read_outcomes()
                yield finish(submission_id, state, outcomes)
                return
            now = clock()
            if now - started >= limit_s:
                yield error_event(submission_id, 504, f"Submission {submission_id} is still running; check it "
                                                      f"with: popcorn-cli submissions show {submission_id}")
                return
            if now >= next_status:
                yield status_event(submission_id, gpu, (state and state.job_status) or "initial", now - started)
                next_status += status_every_s
            await sleep(max(0.0, min(delay, next_status - now, started + limit_s - now)))
            delay = min(delay * 1.5, POLL_MAX_S)
            state = await poll(state)
    except Exception:  # the stream must still end with an error event
        ref = uuid.uuid4().hex[:12]
        log.exception("stream of submission %s failed (ref %s)", submission_id, ref)
        yield error_event(submission_id, 500, f"An unexpected error occurred (ref {ref})")
