"""Admin routes that create, replace, sync and delete leaderboards (docs/http-api.md "Admin routes").

Every change is an event (LeaderboardCreated / LeaderboardUpdated / LeaderboardDeleted, and SubmissionDeleted for
the submissions of a board deleted with force); the routes answer once the read model shows it, so the admin who
asked reads their own writes. `POST /admin/problems/sync` is a platform extension: the same sync as
update-problems, fed by an archive of a local checkout (`kernelbot problems sync`).
"""

from __future__ import annotations

import asyncio
import re
import uuid
from datetime import UTC, datetime
from pathlib import Path

from fastapi import APIRouter, Depends, HTTPException, UploadFile
from pydantic import BaseModel

from problems import PROBLEMS_ROOT
from runner.task.taskfile import TASK_FILE_NAME, TaskFileError, load_problem
from schemas.envelope import Event
from schemas.events import LeaderboardCreated, LeaderboardDeleted, LeaderboardUpdated
from schemas.precheck_events import PrecheckPolicySet
from services.core.admin import dev_boards
from services.core.infrastructure import settle
from services.core.problems import apply
from services.core.problems import archive as problem_archive
from services.core.problems import repository as problems_repository
from services.core.problems.sync import ProblemSetNotFound, SyncPlan, name_problem
from services.gateway.deps import Broker, Pool, Position, Settings, require_admin

router = APIRouter(prefix="/admin", dependencies=[Depends(require_admin)])
# Besides SubmissionDeleted, which the gateway documents already.
PUBLISHES = (LeaderboardCreated, LeaderboardUpdated, LeaderboardDeleted, PrecheckPolicySet)

VISIBILITIES = ("public", "closed")
DIRECTORY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")


class DevLeaderboard(BaseModel):
    directory: str | None = None
    visibility: str | None = None


class UpdateProblems(BaseModel):
    repository: str | None = None  # None: KB_PROBLEMS_REPOSITORY (reference-kernels unless configured)
    branch: str = "main"
    problem_set: str | None = None
    force: bool = False
    visibility: str | None = None


def _visibility(value: str | None) -> str:
    value = "public" if value is None else value
    if value not in VISIBILITIES:
        raise HTTPException(400, "visibility must be 'public' or 'closed'")
    return value


async def _deletion(pool, row, *, force: bool, tag: str) -> list[Event]:
    try:
        return await dev_boards.deletion_events(pool, row, force=force, tag=tag)
    except dev_boards.BoardHasSubmissions as refused:
        raise HTTPException(400, str(refused)) from refused


def _dev_directory(root: Path, directory: str) -> Path:
    """`<root>/<dir>` or `<root>/<set>/<dir>` (the reference-kernels layout), never outside the root."""
    if not DIRECTORY.match(directory):
        raise HTTPException(400, "Invalid problem directory")
    resolved_root = root.resolve()
    for candidate in (root / directory, *sorted(root.glob(f"*/{directory}"))):
        if (candidate / TASK_FILE_NAME).is_file() and candidate.resolve().is_relative_to(resolved_root):
            return candidate
    raise HTTPException(400, "Invalid problem directory")


@router.post("/leaderboards")
async def create_dev_leaderboard(body: DevLeaderboard, pool: Pool, broker: Broker, position: Position,
                                 settings: Settings) -> dict:
    """`<directory>-dev` from the development problems; an existing one is replaced only once all checks pass."""
    if not body.directory:
        raise HTTPException(400, "Missing required field: directory")
    visibility = _visibility(body.visibility)
    root = Path(settings.dev_problems_dir) if settings.dev_problems_dir else PROBLEMS_ROOT
    directory = _dev_directory(root, body.directory)
    name = dev_boards.dev_board_name(body.directory)
    if name_problem(name):
        raise HTTPException(400, "Invalid problem directory")
    try:
        problem = await asyncio.to_thread(load_problem, directory, root=root)
    except TaskFileError as exc:
        raise HTTPException(400, f"Invalid task definition: {str(exc).replace(str(root.resolve()), 'problems')}") \
            from exc
    if not problem.gpus:
        raise HTTPException(400, "No gpus specified in task.yml. Add 'gpus:' field with list of GPU types.")
    events, created = await dev_boards.dev_board_events(pool, name, problem, gpus=problem.gpus,
                                                         now=datetime.now(UTC), visibility=visibility)
    await settle.publish_and_settle(broker, events, position, settings.projection_wait_s)
    return {"status": "ok", "leaderboard": name}


@router.delete("/leaderboards/{leaderboard}")
async def delete_leaderboard(leaderboard: str, pool: Pool, broker: Broker, position: Position, settings: Settings,
                             force: bool = False) -> dict:
    row = await problems_repository.board(pool, leaderboard)
    if row is None:
        raise HTTPException(404, f"Leaderboard `{leaderboard}` does not exist.")
    events = await _deletion(pool, row, force=force, tag=uuid.uuid4().hex)
    await settle.publish_and_settle(broker, events, position, settings.projection_wait_s)
    return {"status": "ok", "leaderboard": row["name"], "force": force}


async def _sync_archive(data: bytes, pool, broker, position, settings, *, problem_set: str | None, force: bool,
                        visibility: str) -> dict:
    """Unpack, plan against the boards that exist, publish; per-problem failures land in the report."""
    try:
        plan = await apply.plan_archive(pool, data, problem_set=problem_set, force=force, visibility=visibility)
    except problem_archive.ArchiveError as exc:
        return {"status": "ok", **SyncPlan(errors=[{"name": "download", "error": str(exc)}]).report()}
    except ProblemSetNotFound as exc:
        raise HTTPException(400, str(exc)) from exc
    await apply.publish_plan(broker, plan, position, settings.projection_wait_s)
    return {"status": "ok", **plan.report()}


@router.post("/update-problems")
async def update_problems(body: UpdateProblems, pool: Pool, broker: Broker, position: Position,
                          settings: Settings) -> dict:
    """Sync the problems of a repository branch (reference-kernels by default)."""
    if "/" in body.branch:
        raise HTTPException(400, "Branch names with slashes are not supported")
    visibility = _visibility(body.visibility)
    repository = body.repository or settings.problems_repository
    if not problem_archive.REPOSITORY.match(repository) or not body.branch:
        raise HTTPException(400, "repository must be <owner>/<name> and branch must not be empty")
    url = problem_archive.archive_url(settings.problems_archive_url, repository, body.branch)
    try:
        data = await problem_archive.download(url)
    except problem_archive.ArchiveError as exc:
        return {"status": "ok", **SyncPlan(errors=[{"name": "download", "error": str(exc)}]).report()}
    return await _sync_archive(data, pool, broker, position, settings, problem_set=body.problem_set, force=body.force,
                               visibility=visibility)


@router.post("/problems/sync")
async def sync_uploaded_problems(file: UploadFile, pool: Pool, broker: Broker, position: Position,
                                 settings: Settings,
                                 problem_set: str | None = None, force: bool = False,
                                 visibility: str | None = None) -> dict:
    """Platform extension: the sync of update-problems over an uploaded zip or tar.gz of a checkout's problems/."""
    visibility = _visibility(visibility)
    return await _sync_archive(await file.read(), pool, broker, position, settings, problem_set=problem_set, force=force,
                               visibility=visibility)
