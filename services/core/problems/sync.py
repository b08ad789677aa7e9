"""Problem sync (docs/authoring.md "Loading problems onto a server"): which leaderboards a problems/ checkout creates,
updates or skips, and the events that say so. No network and no database: the caller passes the boards that exist and
publishes the events this returns.

Both sources (a downloaded repository archive and an uploaded local checkout) come here, so the rules exist once.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from runner.task.competition import (
    CompetitionEntry,
    CompetitionFileError,
    competition_files,
    load_competition,
    parse_deadline,
)
from runner.task.harness_choice import harness_field_applies, protection_of
from runner.task.taskfile import TASK_FILE_NAME, LoadedProblem, TaskFileError, load_problem
from schemas.contracts import Task
from schemas.envelope import Event
from schemas.events import LeaderboardCreated, LeaderboardUpdated
from schemas.precheck_events import PrecheckPolicySet
from services.core.admission.precheck import validate_overrides

# Scoring- or correctness-relevant: a change needs force (the new platform's list, docs/authoring.md).
SIGNIFICANT = ("files", "config", "lang", "tests", "benchmarks", "ranking_by", "seed", "multi_gpu", "harness")
NAME_RULE = re.compile(r"[a-z0-9][a-z0-9._-]*\Z")
MAX_NAME_LENGTH = 95
RESERVED_NAMES = frozenset({"admin", "auth", "user", "submission", "submissions", "submission_count", "gpus", "profile",
                            "leaderboards", "runner_queue", "health", "docs", "openapi.json"})
NO_CHANGES = "no changes"
NEEDS_FORCE = "significant task changes require --force"


class ProblemSetNotFound(LookupError):
    def __init__(self, available: list[str]):
        super().__init__(f"Problem set not found. Available: {available}")
        self.available = available


@dataclass(frozen=True)
class Board:
    """An existing leaderboard as sync compares it."""

    name: str
    task: dict[str, Any]
    description: str
    templates: dict[str, str]
    deadline: datetime


@dataclass
class SyncPlan:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    errors: list[dict[str, str]] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    # Per board this sync created, updated or found unchanged: whether its runs get a protected harness, and why
    # (runner/task/harness_choice.py `protection_of`), so that an organiser sees it before the first submission.
    harness: dict[str, dict[str, Any]] = field(default_factory=dict)

    def report(self) -> dict[str, Any]:
        return {"created": self.created, "updated": self.updated, "skipped": self.skipped, "errors": self.errors,
                "harness": self.harness}

    def fail(self, event: Event, error: str) -> None:
        """An event that could not be stored: its name moves from created/updated to errors."""
        if isinstance(event, PrecheckPolicySet):
            self.errors.append({"name": event.leaderboard, "error": f"precheck outcomes not stored: {error}"})
            return
        board = cast(LeaderboardCreated | LeaderboardUpdated, event)  # a sync publishes no other kind of event
        verb = "create" if isinstance(board, LeaderboardCreated) else "update"
        listed = self.created if verb == "create" else self.updated
        if board.name in listed:
            listed.remove(board.name)
        self.errors.append({"name": board.name, "error": f"{verb} failed: {error}"})


def name_problem(name: str) -> str | None:
    """Why a leaderboard name cannot be created (docs/http-api.md "Names"), or None when it can."""
    if len(name) > MAX_NAME_LENGTH:
        return f"leaderboard name {name!r} is longer than {MAX_NAME_LENGTH} characters"
    if not NAME_RULE.match(name) or name in RESERVED_NAMES:
        return f"invalid leaderboard name {name!r}: use lower-case letters, digits, '.', '_' and '-', not a route name"
    return None


def stored_task(task: dict[str, Any]) -> dict[str, Any]:
    """A stored task in today's shape, so that fields added since it was stored compare as their defaults."""
    return Task.model_validate(task).model_dump(mode="json")


def _relative_message(message: str, root: Path) -> str:
    """Error texts name files from the checkout (`problems/...`), never the server's temporary directory."""
    for prefix in {str(root.resolve()), str(root)}:
        message = message.replace(prefix, "problems")
    return message


def plan_sync(
    root: Path,
    boards: dict[str, Board],
    *,
    problem_set: str | None,
    force: bool,
    visibility: str,
    now: datetime,
    new_secret: Callable[[], int],
    event_tag: str,
) -> SyncPlan:
    """Plan one sync of `root` (a `problems/` directory) against `boards` (keyed by lower-case name).

    `event_tag` makes this request's events distinct from earlier ones with the same content (a board deleted and
    created again within the stream's duplicate window is a new fact, not a duplicate).
    """
    root = Path(root)
    files = competition_files(root)
    if problem_set is not None:
        available = sorted(path.stem for path in files)
        files = [path for path in files if path.stem == problem_set]
        if not files:
            raise ProblemSetNotFound(available)
    plan = SyncPlan()
    boards = dict(boards)
    for path in files:
        try:
            competition = load_competition(path)
        except CompetitionFileError as exc:
            plan.errors.append({"name": path.stem, "error": f"Invalid YAML: {_relative_message(str(exc), root)}"})
            continue
        for entry in competition.entries:
            _plan_entry(plan, root, entry, boards, force=force, visibility=visibility, now=now,
                        new_secret=new_secret, event_tag=event_tag)
            _plan_precheck(plan, entry, competition.precheck, boards, event_tag)
    return plan


def _plan_precheck(plan: SyncPlan, entry: CompetitionEntry, file_outcomes: dict[str, str] | None,
                   boards: dict[str, Board], event_tag: str) -> None:
    """The competition's pre-check outcomes (the file's, then the problem's) for a board this sync keeps."""
    outcomes = (file_outcomes or {}) | (entry.precheck or {})
    name = (entry.name or "").lower()
    if not outcomes or (name not in boards and name not in plan.created):
        return
    try:
        checked = validate_overrides(outcomes)
    except ValueError as exc:
        plan.errors.append({"name": name, "error": f"precheck: {exc}"})
        return
    plan.events.append(PrecheckPolicySet(leaderboard=name, outcomes=checked, change_id=f"sync-{event_tag}"))


def _plan_entry(plan: SyncPlan, root: Path, entry: CompetitionEntry, boards: dict[str, Board], *, force: bool,
                visibility: str, now: datetime, new_secret: Callable[[], int], event_tag: str) -> None:
    if entry.name is None or entry.directory is None:
        plan.skipped.append({"name": entry.name or "", "reason": "Missing name or directory"})
        return
    name = entry.name.lower()
    if entry.problem:
        plan.errors.append({"name": name, "error": entry.problem})
        return
    directory = (root / entry.directory).resolve()
    if not directory.is_relative_to(root.resolve()) or not (directory / TASK_FILE_NAME).is_file():
        plan.skipped.append({"name": name, "reason": f"Directory {entry.directory} not found"})
        return
    try:
        problem = load_problem(directory, root=root)
    except TaskFileError as exc:
        reason = f"Failed to parse task.yml: {_relative_message(str(exc), root)}"
        plan.skipped.append({"name": name, "reason": reason})
        return
    if entry.harness is not None:  # the competition file's choice of harness wins over the task.yml's
        problem = replace(problem, task=problem.task.model_copy(update={"harness": entry.harness}))
    board = boards.get(name)
    try:
        deadline = board.deadline if board and entry.deadline is None else parse_deadline(entry.deadline, now)
    except ValueError as exc:
        plan.errors.append({"name": name, "error": str(exc)})
        return
    if board is None:
        _plan_create(plan, name, entry, problem, deadline, boards, visibility, new_secret, event_tag)
    else:
        _plan_update(plan, board, problem, deadline, boards, force, event_tag)
    if name in boards and (name in plan.created or name in plan.updated or
                           {"name": boards[name].name, "reason": NO_CHANGES} in plan.skipped):
        protected, reason = protection_of(Task.model_validate(boards[name].task))
        plan.harness[name] = {"protected": protected, "reason": reason}


def _plan_create(plan: SyncPlan, name: str, entry: CompetitionEntry, problem: LoadedProblem, deadline: datetime,
                 boards: dict[str, Board], visibility: str, new_secret: Callable[[], int], event_tag: str) -> None:
    gpus = entry.gpus or problem.gpus
    if not gpus:
        plan.skipped.append({"name": name, "reason": "No GPUs specified in task.yml or YAML"})
        return
    invalid = name_problem(name)
    if invalid:
        plan.errors.append({"name": name, "error": invalid})
        return
    plan.events.append(LeaderboardCreated(
        event_id=f"LeaderboardCreated:{name}:{event_tag}", name=name, description=problem.description,
        task=problem.task, task_hash=problem.task_hash, templates=problem.templates, gpus=list(gpus),
        deadline=deadline, visibility=visibility, secret_seed=new_secret(),
    ))
    plan.created.append(name)
    boards[name] = Board(name, problem.task.model_dump(mode="json"), problem.description, problem.templates, deadline)


def _plan_update(plan: SyncPlan, board: Board, problem: LoadedProblem, deadline: datetime,
                 boards: dict[str, Board], force: bool, event_tag: str) -> None:
    new, old = problem.task.model_dump(mode="json"), stored_task(board.task)
    if new["harness"] != old["harness"] and not harness_field_applies(problem.task):
        # Boards stored before `kernelbot` became the default say `problem`; where the field changes nothing (our
        # own eval.py, or CUDA) the stored value stays, so that the new default alone is not a change needing force.
        problem = replace(problem, task=problem.task.model_copy(update={"harness": old["harness"]}))
        new = problem.task.model_dump(mode="json")
    significant = [key for key in SIGNIFICANT if new.get(key) != old.get(key)]
    changed = new != old or problem.description != board.description or problem.templates != board.templates \
        or deadline != board.deadline
    if not changed:
        plan.skipped.append({"name": board.name, "reason": NO_CHANGES})
        return
    if significant and not force:
        plan.skipped.append({"name": board.name, "reason": NEEDS_FORCE})
        return
    plan.events.append(LeaderboardUpdated(
        event_id=f"LeaderboardUpdated:{board.name}:{event_tag}", name=board.name, description=problem.description,
        task=problem.task, task_hash=problem.task_hash, templates=problem.templates, deadline=deadline,
    ))
    plan.updated.append(board.name)
    boards[board.name.lower()] = Board(board.name, new, problem.description, problem.templates, deadline)
