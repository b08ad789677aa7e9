"""`POST /profile/{leaderboard}/{gpu}` as released popcorn-cli sends `submit --profile` (docs/quickstart.md,
"Profiling"), and the download links of its artifacts.

The submit is the streaming submit in profile mode with capture options: the same identity, permissions, rate
limits, pre-check, queue and backends (services/gateway/submitting/intake.py), the same SSE framing; its terminal event is
services/gateway/submitting/profile_answer.py's.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hmac
from typing import Annotated, cast, get_args

from fastapi import APIRouter, Depends, Form, Header, HTTPException, Request, UploadFile
from fastapi.responses import Response, StreamingResponse
from pydantic import ValidationError

from schemas.contracts import MAX_KERNEL_NAME, MAX_PROFILE_LAUNCHES, KernelNameBase, ProfileOptions
from services.core.admission.policy import refuse
from services.core.presentation.results import RunOutcome
from services.core.rules import artifact_links
from services.gateway.deps import CliUser, OptionalUser, Pool, Settings, idempotency_key, limits_of
from services.gateway.routes.pages import Viewer
from services.gateway.routes.stream import STREAM_DOC, follow_stream
from services.gateway.submitting import artifacts_repository, intake, profile_answer
from services.gateway.web.session import secret_key

router = APIRouter()
INVALID_LINK = "This download link is not valid: ask for the profile again"
EXPIRED_LINK = "This download link has expired: ask for the profile again"
NOT_YOURS = "Only the submitter and admins may download this profile"


KERNEL_NAME_BASES = get_args(KernelNameBase)


def _given(raw: str | None) -> str | None:
    """A form field's text; empty or absent is None, as FastAPI reads an empty optional form field upstream."""
    return None if raw is None or raw.strip() == "" else raw.strip()


def _one_of(name: str, alias: str, value: str | None, aliased: str | None) -> str | None:
    """popcorn-cli's field, or our earlier name for it; both given must agree."""
    value, aliased = _given(value), _given(aliased)
    if value is not None and aliased is not None and value != aliased:
        refuse(400, f"{name} and {alias} name the same option: give one of them")
    return value if value is not None else aliased


def _whole(name: str, raw: str | None, lowest: int, highest: int) -> int | None:
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = lowest - 1
    if not lowest <= value <= highest:
        refuse(400, f"{name} must be an integer from {lowest} to {highest}")
    return value


def capture_options(benchmark_index: str | None = None, ncu_kernel_name: str | None = None,
                    ncu_kernel_name_base: str | None = None, ncu_launch_count: str | None = None,
                    launch_skip: str | None = None, *, kernel_name: str | None = None,
                    launch_count: str | None = None) -> ProfileOptions:
    """The multipart capture fields as options, checked as upstream KernelBot checks them (a 400 naming the field);
    `kernel_name` and `launch_count` are our earlier names of popcorn-cli's `ncu_kernel_name` and `ncu_launch_count`.
    """
    name = _one_of("ncu_kernel_name", "kernel_name", ncu_kernel_name, kernel_name)
    if name is not None and (len(name) > MAX_KERNEL_NAME or "\x00" in name):
        refuse(400, f"ncu_kernel_name must contain 1..{MAX_KERNEL_NAME} characters without NUL")
    base = _given(ncu_kernel_name_base)
    if base is not None and base not in KERNEL_NAME_BASES:
        refuse(400, "ncu_kernel_name_base must be function, demangled, or mangled")
    count = _whole("ncu_launch_count", _one_of("ncu_launch_count", "launch_count", ncu_launch_count, launch_count),
                   1, MAX_PROFILE_LAUNCHES)
    try:
        return ProfileOptions(benchmark_index=_whole("benchmark_index", _given(benchmark_index), 0, 1_000_000),
                              kernel_name=name, kernel_name_base=cast(KernelNameBase | None, base),
                              launch_count=count, launch_skip=_whole("launch_skip", _given(launch_skip), 0, 100_000)
                              or 0)
    except ValidationError as invalid:
        error = invalid.errors()[0]
        refuse(400, f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}")
        raise  # refuse raised


@router.post("/profile/{leaderboard}/{gpu}", response_class=StreamingResponse, responses=STREAM_DOC,
             dependencies=[Depends(idempotency_key)])
async def profile_submit(leaderboard: str, gpu: str, file: UploadFile, request: Request, user: CliUser,
                         settings: Settings, pool: Pool,
                         benchmark_index: Annotated[str | None, Form()] = None,
                         ncu_kernel_name: Annotated[str | None, Form()] = None,
                         ncu_kernel_name_base: Annotated[str | None, Form()] = None,
                         ncu_launch_count: Annotated[str | None, Form()] = None,
                         launch_skip: Annotated[str | None, Form()] = None,
                         kernel_name: Annotated[str | None, Form(description="our earlier name of ncu_kernel_name")]
                         = None,
                         launch_count: Annotated[str | None, Form(description="our earlier name of ncu_launch_count")]
                         = None) -> StreamingResponse:
    """Profile a submission on one GPU: Nsight Compute on NVIDIA, rocprofv3 on AMD, torch.profiler on CPU. The
    stream ends with a `result` event holding each case's zip inline (base64), its download link beside it, the
    system and the profile's metadata, or an `error`."""
    options = capture_options(benchmark_index, ncu_kernel_name, ncu_kernel_name_base, ncu_launch_count, launch_skip,
                              kernel_name=kernel_name, launch_count=launch_count)
    release = limits_of(request).streams.take(user.user_id)
    try:
        accepted = await intake.accept(request, user, leaderboard, gpu, "profile", file, profile=options)
    except BaseException:
        release()
        raise
    base_url, key = settings.public_url or str(request.base_url), secret_key(request)

    def make_link(run_gpu: str, stage: str) -> str:
        return artifact_links.link(base_url, key, accepted.submission_id, run_gpu, stage,
                                   ttl_s=settings.profile_link_ttl_s)

    async def read_traces(outcomes: list[RunOutcome]) -> list[RunOutcome]:
        return await artifacts_repository.with_traces(pool, accepted.submission_id, outcomes)

    return follow_stream(request, accepted, release, finish=functools.partial(profile_answer.final_event,
                                                                              make_link=make_link),
                         complete=read_traces)


def _admin(settings, authorization: str | None) -> bool:
    token = settings.admin_token.get_secret_value() if settings.admin_token else ""
    return bool(token and authorization and hmac.compare_digest(authorization.encode(), f"Bearer {token}".encode()))


@router.get(artifact_links.PATH + "/{submission_id}/{gpu}/{stage}", response_class=Response,
            responses={200: {"content": {"application/zip": {}}, "description": "The profiled case's zip"}})
async def profile_artifact(submission_id: int, gpu: str, stage: str, expires: int, signature: str, request: Request,
                           pool: Pool, settings: Settings, user: OptionalUser, viewer: Viewer,
                           authorization: Annotated[str | None, Header()] = None) -> Response:
    """One profiled case's zip, for its submitter (CLI or web identity, or the web session) or an admin
    (`Authorization: Bearer`), while its link is valid."""
    if not artifact_links.authentic(secret_key(request), submission_id, gpu, stage, expires, signature):
        raise HTTPException(403, INVALID_LINK)
    if artifact_links.expired(expires):
        raise HTTPException(410, EXPIRED_LINK)
    admin, person = _admin(settings, authorization), user or viewer
    if not admin and person is None:
        raise HTTPException(401, "Sign in to download this profile: send your X-Popcorn-Cli-Id header")
    row = await artifacts_repository.artifact(pool, submission_id, gpu, stage)
    if row is None or not row["trace"]:
        raise HTTPException(404, "No such profile")
    if not admin and (person is None or person.user_id != str(row["user_id"])):
        raise HTTPException(403, NOT_YOURS)
    try:
        data = base64.b64decode(row["trace"], validate=True)
    except (binascii.Error, ValueError):
        raise HTTPException(404, "No such profile") from None
    name = profile_answer.zip_folder(row["trace"], stage)
    return Response(data, media_type="application/zip", headers={
        "Content-Disposition": f'attachment; filename="{name}.zip"', "Cache-Control": "private, no-store"})
