"""Loading the bundled example problems as leaderboards, the first time a platform starts."""

from __future__ import annotations

import secrets
from pathlib import Path

import yaml

from runner.task.competition import parse_deadline
from runner.task.taskfile import load_problem
from schemas.events import LeaderboardCreated

__all__ = ["leaderboards_from_competition", "parse_deadline"]  # parse_deadline: the one rule, from runner


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
            secret_seed=secrets.randbits(31), practice=True,  # examples to try the platform on, not a contest
        ))
    return events
