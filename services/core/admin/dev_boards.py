"""Admin use cases on leaderboards that both front ends offer: delete one, and create a `<directory>-dev` board.

One decision for both the gateway (POST /admin/leaderboards) and the bot (/admin create-dev-leaderboard, upstream's
create-local): a dev board lives DEV_LIFETIME (a year, as upstream's create-local and the synced boards' default),
and creating it again replaces the existing one, its submissions with it. A dev board is a scratch board for the
problem's author, so a second create means "with my edits", not a mistake to refuse.
"""

from __future__ import annotations

import secrets
import uuid
from datetime import datetime

from runner.task.competition import DEFAULT_LIFETIME
from runner.task.taskfile import LoadedProblem
from schemas.envelope import Event
from schemas.events import LeaderboardCreated, LeaderboardDeleted, SubmissionDeleted
from services.core.problems import repository as problems_repository

DEV_LIFETIME = DEFAULT_LIFETIME


class BoardHasSubmissions(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(f"Could not delete leaderboard `{name}` with existing submissions.")


def dev_board_name(directory_name: str) -> str:
    return f"{directory_name}-dev".lower()


async def deletion_events(pool, row, *, force: bool, tag: str | None = None) -> list[Event]:
    """The events that delete a board: its live submissions first (with `force`), then the board itself. Raises
    BoardHasSubmissions when it has live ones and `force` is not given."""
    submissions = await problems_repository.live_submissions(pool, row["name"])
    if submissions and not force:
        raise BoardHasSubmissions(row["name"])
    events: list[Event] = [SubmissionDeleted(submission_id=s["id"], user_id=str(s["user_id"]), by_admin=True)
                           for s in submissions]
    events.append(LeaderboardDeleted(event_id=f"LeaderboardDeleted:{row['name']}:{tag or uuid.uuid4().hex}",
                                     name=row["name"], task_hash=row["task_hash"], force=force))
    return events


async def dev_board_events(pool, name: str, problem: LoadedProblem, *, gpus: list[str], now: datetime,
                           visibility: str = "public", creator_id: int = 0, forum_id: int = -1,
                           ) -> tuple[list[Event], LeaderboardCreated]:
    """The events that (re)create dev board `name` from a loaded problem: the deletion of an existing board of that
    name, forced, then its creation with a fresh secret seed. Returns all events and the creation among them."""
    tag = uuid.uuid4().hex
    existing = await problems_repository.board(pool, name)
    events = await deletion_events(pool, existing, force=True, tag=tag) if existing else []
    created = LeaderboardCreated(
        event_id=f"LeaderboardCreated:{name}:{tag}", name=name, description=problem.description,
        task=problem.task, task_hash=problem.task_hash, templates=problem.templates, gpus=gpus,
        deadline=now + DEV_LIFETIME, visibility=visibility, secret_seed=secrets.randbits(31),
        creator_id=creator_id, forum_id=forum_id, practice=True,
    )
    return [*events, created], created
