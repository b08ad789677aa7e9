"""Loading the bundled example problems as leaderboards, the first time a platform starts."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

from runner.taskfile import load_problem
from schemas.events import LeaderboardCreated

DEFAULT_LIFETIME = timedelta(days=365)


def parse_deadline(value: object) -> datetime:
    """Competition-file deadlines are naive UTC (harness.md §1.2); missing means a year from now."""
    if value in (None, ""):
        return datetime.now(UTC) + DEFAULT_LIFETIME
    text = str(value).strip()
    for fmt in ("%Y-%m-%d %H:%M", "%Y-%m-%d"):
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise ValueError(f"unparsable deadline {text!r}")


def leaderboards_from_competition(competition_file: Path, existing: set[str]) -> list[LeaderboardCreated]:
    """LeaderboardCreated events for the entries of a competition file that are not boards yet."""
    root = competition_file.parent
    spec = yaml.safe_load(competition_file.read_text()) or {}
    events = []
    for entry in spec.get("problems", []):
        name = str(entry["name"]).lower()
        if name in existing:
            continue
        problem = load_problem(root / entry["directory"], root=root)
        gpus = list(entry.get("gpus") or problem.gpus)
        events.append(LeaderboardCreated(
            name=name, description=problem.description, task=problem.task, task_hash=problem.task_hash,
            templates=problem.templates, gpus=gpus, deadline=parse_deadline(entry.get("deadline")),
            secret_seed=secrets.randbits(31),
        ))
    return events
