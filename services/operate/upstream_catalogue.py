"""Upstream boards, users and policy as this platform's events (pure; rows as upstream_source.py reads them).

Every event gets an id of its own, `upstream:` and the id the platform would give it, so that an import resumed or
run again publishes only what the stream lacks, and an upstream id that collides with one made here is seen as such.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar

from pydantic import ValidationError

from runner.task.taskfile import compute_task_hash
from schemas.auth_events import OAuthUserRegistered, WebAuthIdSet
from schemas.contracts import Task
from schemas.credentials import cli_id_hash
from schemas.envelope import Event
from schemas.events import CliUserRegistered, LeaderboardCreated
from schemas.policy_events import InviteClaimed, InvitesCreated, RateLimitSet, UserBanned
from schemas.task_validation import TaskValidation
from services.operate.upstream_source import Catalogue

E = TypeVar("E", bound=Event)
PREFIX = "upstream:"
# When a board with no submission and no invite was created is not recorded upstream; it is dated before anything it
# could hold (upstream's schema dates from December 2024), so that it is history: Discord announces nothing of it.
UPSTREAM_EPOCH = datetime(2024, 12, 1, tzinfo=UTC)
PROVIDERS = ("discord", "github")


def imported(event: E) -> E:
    return event.model_copy(update={"event_id": PREFIX + event.event_id})


def moment(value: str) -> datetime:
    parsed = datetime.fromisoformat(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)  # upstream's created_at has no zone: UTC


def when(value: str | None) -> datetime | None:
    return moment(value) if value else None


@dataclass
class Report:
    """What could not be carried over as it was, one line each, and counts of what was."""

    problems: list[str] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)

    def note(self, line: str) -> None:
        self.problems.append(line)

    def text(self) -> str:
        carried = "\n".join(f"  {name}: {count}" for name, count in sorted(self.counts.items()))
        problems = "\n".join(f"  - {line}" for line in self.problems) or "  (none)"
        return f"Imported from upstream:\n{carried}\nNot mapped, or mapped with a change:\n{problems}\n"


@dataclass(frozen=True)
class Board:
    name: str
    task: Task
    gpus: list[str]


def boards(catalogue: Catalogue, first_seen: dict[int, datetime], report: Report) -> tuple[list[Event],
                                                                                          dict[int, Board]]:
    gpus: dict[int, list[str]] = {}
    for row in catalogue.gpus:
        gpus.setdefault(row["leaderboard_id"], []).append(row["gpu_type"])
    templates: dict[int, dict[str, str]] = {}
    for row in catalogue.templates:
        templates.setdefault(row["leaderboard_id"], {})[row["lang"]] = row["code"]
    events: list[Event] = []
    known: dict[int, Board] = {}
    for row in catalogue.boards:
        task_json = dict(row.get("task") or {})
        description = row.get("description") or task_json.pop("description", "") or ""
        board_templates = templates.get(row["id"]) or task_json.pop("templates", None) or {}
        task_json = _with_readable_validation(task_json, row["name"], report)
        try:
            task = Task.model_validate(task_json)
        except ValidationError as exc:
            report.note(f"board {row['name']!r} (id {row['id']}): task not readable, board and its submissions "
                        f"skipped ({exc.error_count()} errors, first: {exc.errors()[0]['msg']})")
            continue
        visibility = row.get("visibility") or "public"
        if visibility not in ("public", "closed"):
            report.note(f"board {row['name']!r}: unknown visibility {visibility!r}, imported as closed")
            visibility = "closed"
        board_gpus = gpus.get(row["id"], [])
        if not board_gpus:
            report.note(f"board {row['name']!r}: no GPU types upstream; imported without GPUs")
        events.append(imported(LeaderboardCreated(
            name=row["name"], description=description, task=task, task_hash=compute_task_hash(task),
            templates=board_templates, gpus=board_gpus, deadline=moment(row["deadline"]), visibility=visibility,
            secret_seed=int(row.get("secret_seed") or 0), creator_id=int(row.get("creator_id") or 0),
            forum_id=-1 if row.get("forum_id") is None else int(row["forum_id"]), board_id=int(row["id"]),
            occurred_at=first_seen.get(row["id"], UPSTREAM_EPOCH))))
        known[row["id"]] = Board(row["name"], task, board_gpus)
    report.counts["boards"] = len(known)
    return events, known


def _with_readable_validation(task_json: dict, board: str, report: Report) -> dict:
    """Upstream's stored task with its application validation (`{"version", "source"}`), or without it where that
    cannot be read: the validation annotates a board, so it never keeps the board and its submissions out."""
    validation = task_json.get("validation")
    if validation is None:
        return task_json
    try:
        TaskValidation.model_validate(validation)
    except ValidationError as exc:
        report.note(f"board {board!r}: application validation not readable, imported without it "
                    f"({exc.errors()[0]['msg']})")
        return {key: value for key, value in task_json.items() if key != "validation"}
    return task_json


def users(catalogue: Catalogue, report: Report) -> tuple[list[Event], dict[str, str], set[str]]:
    """Their events, every user's name by id, and the ids of the users this platform now knows (with an id to sign
    in with): only those can carry a ban."""
    events: list[Event] = []
    names: dict[str, str] = {}
    registered: set[str] = set()
    for row in catalogue.users:
        user_id, name = str(row["id"]), row.get("user_name") or str(row["id"])
        if not row.get("user_name"):
            report.note(f"user {user_id}: no name upstream; shown under their id")
        names[user_id] = name
        cli_id, web_id = row.get("cli_id"), row.get("web_auth_id")
        if cli_id and row.get("cli_valid", True) is False:
            report.note(f"user {user_id}: CLI id not valid upstream (sign-in never finished); not carried")
            cli_id = None
        if cli_id:
            web = cli_id_hash(web_id) if web_id else None
            events.append(imported(CliUserRegistered(user_id=user_id, user_name=name,
                                                     cli_id_sha256=cli_id_hash(cli_id), web_auth_id_sha256=web)))
            provider = row.get("cli_auth_provider")
            if provider in PROVIDERS:
                events.append(imported(OAuthUserRegistered(user_id=user_id, user_name=name,
                                                           cli_id_sha256=cli_id_hash(cli_id), provider=provider)))
            elif provider:
                report.note(f"user {user_id}: unknown sign-in provider {provider!r}; CLI id kept, provider not")
            report.counts["users with a CLI id"] += 1
            registered.add(user_id)
        elif web_id:
            events.append(imported(WebAuthIdSet(user_id=user_id, user_name=name,
                                                web_auth_id_sha256=cli_id_hash(web_id))))
            report.counts["users with a web id only"] += 1
            registered.add(user_id)
        else:
            report.counts["users known by their submissions only"] += 1
    return events, names, registered


def policy(catalogue: Catalogue, known: dict[int, Board], names: dict[str, str], registered: set[str],
           report: Report) -> list[Event]:
    """Rate limits, invites (created, then claimed) and bans."""
    events: list[Event] = []
    for row in catalogue.rate_limits:
        board = known.get(row["leaderboard_id"])
        if board is None:
            report.note(f"rate limit {row['id']}: its board was not imported")
            continue
        events.append(imported(RateLimitSet(leaderboard=board.name, mode_category=row["mode_category"],
                                            max_submissions_per_hour=row["max_submissions_per_hour"],
                                            change_id=f"upstream-{row['id']}")))
        report.counts["rate limits"] += 1
    events += invites(catalogue, known, names, report)
    for row in catalogue.users:
        if row.get("is_banned"):
            if str(row["id"]) in registered:
                events.append(imported(UserBanned(user_id=str(row["id"]), change_id="upstream")))
                report.counts["bans"] += 1
            else:
                report.note(f"user {row['id']}: banned upstream but has neither CLI nor web id here; "
                            "ban it again (`/admin ban`) once it signs in")
    return events


def invites(catalogue: Catalogue, known: dict[int, Board], names: dict[str, str], report: Report) -> list[Event]:
    scopes: dict[int, list[str]] = {}
    for row in catalogue.invite_scopes:
        if row["leaderboard_id"] in known:
            scopes.setdefault(row["invite_id"], []).append(known[row["leaderboard_id"]].name)
    by_scope: dict[tuple[str, ...], list[dict]] = {}
    for row in catalogue.invites:
        # an invite from before scopes had one board of its own
        boards_of = scopes.get(row["id"]) or ([known[row["leaderboard_id"]].name]
                                             if row.get("leaderboard_id") in known else [])
        if not boards_of:
            report.note(f"invite {row['code']}: covers no board that was imported (its boards were deleted)")
            continue
        by_scope.setdefault(tuple(sorted(boards_of)), []).append(row)
    events: list[Event] = []
    claims: list[Event] = []
    for scope, rows in sorted(by_scope.items()):
        created = min(when(r["created_at"]) or UPSTREAM_EPOCH for r in rows)
        events.append(imported(InvitesCreated(leaderboards=list(scope), codes=sorted(r["code"] for r in rows),
                                              occurred_at=created)))
        for row in rows:
            if row.get("user_id"):
                user_id = str(row["user_id"])
                claims.append(imported(InviteClaimed(code=row["code"], user_id=user_id,
                                                     user_name=names.get(user_id, user_id),
                                                     occurred_at=when(row.get("claimed_at")) or created)))
        report.counts["invites"] += len(rows)
    report.counts["invites claimed"] += len(claims)
    return events + claims
