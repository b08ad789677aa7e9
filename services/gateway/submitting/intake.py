"""The one admission path of every submit route (docs/http-api.md "Submitting"): judge, record, and answer with the
decision.

The rules live in services.core.admission.policy, shared with the dispatcher; the submit use case that applies them
(services.core.submission.submit) is shared with the Discord bot. The gateway judges first with what its read model
shows, so most refusals cost no event; then it publishes SubmissionReceived and waits for the dispatcher's
authoritative decision, so a submission refused there (two parallel requests racing for the last rate-limit slot, a
ban that just landed) still gets its plain HTTP error instead of a 202.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from fastapi import Request, UploadFile

from schemas.contracts import ProfileOptions
from schemas.events import SubmissionReceived
from services.core.admission import policy
from services.core.readmodel import submission_reads
from services.core.submission import submit
from services.gateway.deps import User, limit_submit, state_of
from services.kit.bus import publish

IDEMPOTENCY_HEADER = "Idempotency-Key"
log = logging.getLogger("kernelbot.gateway")


@dataclass(frozen=True)
class Accepted:
    submission_id: int
    leaderboard: str
    gpu: str
    mode: str


async def accept(request: Request, user: User, leaderboard: str, gpu: str, mode: str, file: UploadFile, *,
                 deadline_applies: bool = True, profile: ProfileOptions | None = None) -> Accepted:
    """Validate a submission (authentication already done) and record it; raises the first refusal of
    docs/http-api.md "Submitting".

    Returns once the dispatcher accepted it and the read model shows it queued, or once the settings' projection
    wait has passed (the submission is then still recorded and judged; the client polls it).
    """
    state = state_of(request)
    key = idempotency_key(request)
    submission_id = None
    if key is not None:
        submission_id = await submission_reads.submission_for_key(state.pool, user.user_id, key)
        earlier = await submission_reads.submission(state.pool, submission_id)
        if earlier is None and await submission_reads.was_deleted(state.pool, submission_id):
            raise policy.Refused(policy.Refusal(409, f"The submission of this {IDEMPOTENCY_HEADER} was deleted"))
        if earlier is not None:  # a retry of a request that was recorded: its answer, not a second submission
            if earlier["status"] == "rejected":
                await raise_refusal(state.pool, submission_id)
            return Accepted(submission_id, earlier["leaderboard_name"], gpu, earlier["mode"])
    await limit_submit(request, user.user_id)  # a retry of a recorded submission (above) is not counted
    content = await file.read(policy.MAX_SUBMISSION_BYTES + 1)
    entry = submit.Entry(leaderboard=leaderboard, gpus=(gpu,), mode=mode, file_name=file.filename, content=content,
                         deadline_applies=deadline_applies, profile=profile)
    admission = await submit.admit(state.pool, submitter(user), entry)
    # A retry whose first attempt was published but not yet projected publishes the same SubmissionReceived id
    # again, and the stream's duplicate window keeps one.
    submission_id = submission_id or await submission_reads.next_submission_id(state.pool)
    await record_and_await_decision(state, admission.received(submission_id))
    return Accepted(submission_id, admission.board_name, gpu, admission.admitted.mode)


def submitter(user: User) -> submit.Submitter:
    return submit.Submitter(user_id=user.user_id, user_name=user.user_name, banned=user.banned, via_cli=user.via_cli)


async def record_and_await_decision(state, received: SubmissionReceived) -> None:
    """Publish, then wait (notified by the ledger) until the dispatcher's decision shows; raise its refusal.

    Once the stream acknowledged the event the submission exists: from then on only the dispatcher's refusal is an
    error. Anything else (Postgres away while waiting, a failed read) answers with the submission, which the client
    polls, because a 5xx would make popcorn-cli submit a second time.
    """
    waiter, submission_id = state.waiter, received.submission_id
    projected = waiter.expect(submission_id)
    try:
        await publish(state.broker, received)
    except BaseException:
        await waiter.wait(submission_id, projected, 0)
        raise
    try:
        await _await_decision(state, submission_id, projected)
    except policy.Refused:
        raise
    except Exception:  # noqa: BLE001 - recorded: the poll tells the rest
        log.warning("submission %s recorded; its decision could not be read", submission_id, exc_info=True)


async def _await_decision(state, submission_id: int, pending: asyncio.Future) -> None:
    pool, waiter = state.pool, state.waiter
    loop = asyncio.get_running_loop()
    deadline = loop.time() + state.settings.projection_wait_s
    while True:
        if await waiter.wait(submission_id, pending, max(0.0, deadline - loop.time())) is False:
            return  # the pipeline is slow: answer now, the decision will show on the poll
        pending = waiter.expect(submission_id)  # before reading, so a notification after the read is not lost
        try:
            row = await submission_reads.decision(pool, submission_id)
        except BaseException:
            await waiter.wait(submission_id, pending, 0)
            raise
        if row is not None and (row["status"] == "rejected" or row["planned"] or row["done"]):
            await waiter.wait(submission_id, pending, 0)
            break
    if row["status"] == "rejected":
        await raise_refusal(pool, submission_id)


async def raise_refusal(pool, submission_id: int) -> None:
    """The dispatcher's refusal of a submission, as the plain HTTP error the client gets."""
    payload = await submission_reads.rejection(pool, submission_id) or {}
    raise policy.Refused(policy.Refusal(payload.get("status_code", 400), payload.get("reason", "rejected"),
                                        payload.get("retry_after_s")))


def idempotency_key(request: Request) -> str | None:
    """The optional `Idempotency-Key` header: up to 255 printable ASCII characters."""
    key = request.headers.get(IDEMPOTENCY_HEADER)
    if key is None:
        return None
    if not key or len(key) > 255 or not all(32 < ord(ch) < 127 for ch in key):
        raise policy.Refused(policy.Refusal(400, f"{IDEMPOTENCY_HEADER} must be 1 to 255 printable ASCII characters"))
    return key
