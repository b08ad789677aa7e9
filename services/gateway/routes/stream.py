"""Streaming submit `POST /{lb}/{gpu}/{mode}` (docs/http-api.md "The streaming submit"): every check before the stream,
then SSE.

Registered after every fixed route, and its first segment never matches a reserved name (docs/http-api.md "Names"), so
`POST /admin/submissions/x` is a 404/405 and never a submission to a leaderboard called `admin`.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, UploadFile
from fastapi.responses import StreamingResponse
from starlette.convertors import Convertor, register_url_convertor

from services.core.presentation import results
from services.core.readmodel import submission_reads
from services.gateway.deps import CliUser, idempotency_key, limits_of, state_of
from services.gateway.edge import ratelimit
from services.gateway.submitting import intake, sse

RESERVED = ("admin", "auth", "user", "submission", "submissions", "submission_count", "gpus", "leaderboards",
            "runner_queue", "health", "docs", "openapi.json", "profile")


class LeaderboardSegment(Convertor[str]):
    """A path segment that is not a reserved first segment, compared case-insensitively."""

    regex = "(?!(?i:" + "|".join(name.replace(".", r"\.") for name in RESERVED) + ")/)[^/]+"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("leaderboard", LeaderboardSegment())
router = APIRouter()

STREAM_DOC = {
    200: {
        "description": "The stream: `status` events, then exactly one `result` or `error` event.",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    },
}


@router.post("/{leaderboard:leaderboard}/{gpu}/{mode}", response_class=StreamingResponse, responses=STREAM_DOC,
             dependencies=[Depends(idempotency_key)])
async def stream_submit(leaderboard: str, gpu: str, mode: str, file: UploadFile, request: Request,
                        user: CliUser) -> StreamingResponse:
    # reserved before the submission is recorded: a refused stream leaves no submission behind
    release = limits_of(request).streams.take(user.user_id)
    try:
        accepted = await intake.accept(request, user, leaderboard, gpu, mode, file)
    except BaseException:
        release()
        raise
    return follow_stream(request, accepted, release)


def follow_stream(request: Request, accepted: intake.Accepted, release, finish=sse.final_event,
                  complete=None) -> StreamingResponse:
    """The SSE answer of an accepted submission; `release` frees its stream slot when the stream ends. `complete`
    adds to the finished runs' outcomes what the read model does not hold (the profile route's traces)."""
    pool, submission_id = state_of(request).pool, accepted.submission_id

    async def read_state() -> sse.JobState | None:
        row = await submission_reads.submission_state(pool, submission_id)
        if row is None:
            return None
        return sse.JobState(deleted=row["deleted"], done=row["done"], rejected=row["status"] == "rejected",
                            job_status=row["job_status"], job_error=row["job_error"])

    async def read_outcomes() -> list[results.RunOutcome]:
        requests = await submission_reads.run_requests(pool, submission_id)
        stages = await submission_reads.submission_runs(pool, submission_id)
        found = results.outcomes(requests, stages, [accepted.gpu])
        return found if complete is None else await complete(found)

    frames = sse.follow(submission_id, accepted.gpu, read_state, read_outcomes, finish=finish)
    return ratelimit.ReleasingStream(frames, release, media_type=sse.MEDIA_TYPE, headers=sse.HEADERS)
