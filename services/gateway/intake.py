"""The one admission path of every submit route (http-api.md §6): check in order, then record the submission.

The rules themselves live in services.dispatcher.policy, shared with the dispatcher; this module only runs them in
the order of §6 against what the gateway can read, and publishes SubmissionReceived once they pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from fastapi import HTTPException, Request, UploadFile

from schemas.events import SubmissionReceived
from services.dispatcher import policy
from services.gateway import boards, repository
from services.gateway.deps import User


@dataclass(frozen=True)
class Accepted:
    submission_id: int
    leaderboard: str
    gpu: str
    mode: str


async def accept(request: Request, user: User, leaderboard: str, gpu: str, mode: str, file: UploadFile, *,
                 check_deadline: bool = True) -> Accepted:
    """Validate a submission (authentication already done) and record it; raises the first failure of §6.

    Returns once the read model shows the submission (or the settings' projection wait has passed), so the client
    may poll it at once. Not checked here yet, for want of their read models: the kill switch (step 1), the stream
    content filter (14), `#!POPCORN` directives (15) and rate limits (16).
    """
    state = request.app.state
    pool = state.pool
    if user.banned:
        raise HTTPException(403, "You are banned from making submissions.")
    mode = policy.check_mode(mode)
    row = await boards.existing(pool, leaderboard)
    await boards.check_submit_access(pool, row, user)
    board = boards.view(row)
    policy.check_gpu(board, gpu)
    if check_deadline:
        policy.check_deadline(board, datetime.now(UTC))
    file_name = policy.normalise_file_name(file.filename)  # refuses control characters, NUL included
    content = await file.read(policy.MAX_SUBMISSION_BYTES + 1)
    code = policy.check_file(board, file_name, content)

    submission_id = await repository.next_submission_id(pool)
    received = SubmissionReceived(
        submission_id=submission_id, leaderboard=board.name, gpus=[gpu], mode=mode, user_id=user.user_id,
        user_name=user.user_name, file_name=file_name, code=code, correlation_id=str(submission_id),
    )
    await state.waiter.publish_and_wait(state.broker, received, submission_id, state.settings.projection_wait_s)
    return Accepted(submission_id, board.name, gpu, mode)
