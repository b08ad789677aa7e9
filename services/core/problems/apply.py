"""The problem-sync use case both front ends offer (POST /admin/update-problems and /admin/problems/sync; the bot's
/admin update-problems): plan against the boards that exist, from a directory or a downloaded archive, then publish
the plan's events. An event the stream refuses moves its problem to the report's errors; the rest still apply."""

from __future__ import annotations

import asyncio
import secrets
import tempfile
import uuid
from datetime import UTC, datetime
from pathlib import Path

from schemas.envelope import Event
from services.core.infrastructure.position import LedgerPosition
from services.core.problems import archive
from services.core.problems import repository as problems_repository
from services.core.problems.sync import SyncPlan, plan_sync
from services.kit.bus import PublishFailed, publish


async def plan_directory(pool, root: Path, *, problem_set: str | None, force: bool, visibility: str) -> SyncPlan:
    """The plan for a problems directory; raises ProblemSetNotFound for an unknown problem set."""
    boards = await problems_repository.boards(pool)
    return await asyncio.to_thread(
        plan_sync, root, boards, problem_set=problem_set, force=force, visibility=visibility, now=datetime.now(UTC),
        new_secret=lambda: secrets.randbits(31), event_tag=uuid.uuid4().hex)


async def plan_archive(pool, data: bytes, *, problem_set: str | None, force: bool, visibility: str) -> SyncPlan:
    """The plan for a zip or tar.gz of a checkout; raises archive.ArchiveError when it cannot be unpacked."""
    with tempfile.TemporaryDirectory(prefix="kernelbot-sync-") as scratch:
        await asyncio.to_thread(archive.unpack, data, Path(scratch))
        root = archive.find_problems_root(Path(scratch))
        return await plan_directory(pool, root, problem_set=problem_set, force=force, visibility=visibility)


async def publish_plan(broker, plan: SyncPlan, position: LedgerPosition, timeout_s: float) -> list[Event]:
    """Publish the plan's events in order, each refused one recorded in the plan; then wait (bounded) until the
    ledger has projected what was stored, so the caller's next read shows the boards. Returns the stored events."""
    stored, last = [], 0
    for event in plan.events:
        try:
            last = max(last, await publish(broker, event))
            stored.append(event)
        except PublishFailed as exc:
            plan.fail(event, str(exc))
    if stored:
        await position.reached(last, timeout_s)
    return stored
