"""Competition files, `problems/<set>.yaml` (docs/authoring.md): the problem list of one problem set.

Loading is tolerant per entry, because sync reports a bad entry and goes on with the others
(docs/authoring.md "Loading problems onto a server"): an entry keeps what it has, and what is wrong with it is recorded
on the entry. A file that is not YAML, or whose `problems` is not a list, is a CompetitionFileError naming the file and
the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

DEFAULT_LIFETIME = timedelta(days=365)
DEADLINE_FORMATS = ("%Y-%m-%d %H:%M", "%Y-%m-%d")
HARNESS_CHOICES = ("problem", "kernelbot")


class CompetitionFileError(ValueError):
    """A competition file that cannot be read at all; the message names the file (and the field)."""


@dataclass(frozen=True)
class CompetitionEntry:
    """One `problems[]` item. `name`/`directory` are None when missing; `problem` says what else is wrong."""

    name: str | None
    directory: str | None
    deadline: datetime | str | None  # as written (YAML reads a bare timestamp as a datetime); parse_deadline reads it
    gpus: list[str] | None  # None: take them from task.yml
    problem: str | None = None
    precheck: dict[str, str] | None = None  # this problem's pre-check outcomes, over the file's
    # New platform: which harness judges the problem (the entry's `harness`, else the file's top-level `harness`);
    # None: as its task.yml says. Overrides task.yml, because the operator's competition file decides.
    harness: str | None = None


@dataclass(frozen=True)
class CompetitionFile:
    path: Path
    set_name: str  # the file stem
    title: str
    entries: list[CompetitionEntry]
    # `precheck:` — the source pre-check's outcome per rule for every problem of the file (docs/operations.md)
    precheck: dict[str, str] | None = None


def parse_deadline(value: object, now: datetime | None = None) -> datetime:
    """`YYYY-MM-DD HH:MM` (one-digit hours allowed) or `YYYY-MM-DD`, naive and read as UTC; missing or empty is a
    year from `now`. Raises ValueError for anything else (upstream silently used the default; we report it)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return (now or datetime.now(UTC)) + DEFAULT_LIFETIME
    if isinstance(value, datetime):  # YAML itself reads `2025-01-01 10:00:00` as a timestamp
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    text = str(value).strip()
    for fmt in DEADLINE_FORMATS:
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise ValueError(f"invalid deadline {text!r} (expected YYYY-MM-DD or YYYY-MM-DD HH:MM, read as UTC)")


def competition_files(problems_root: Path) -> list[Path]:
    """Only `problems/*.yaml` are competition files (not recursive), sorted by name."""
    return sorted(path for path in Path(problems_root).glob("*.yaml") if path.is_file())


def load_competition(path: Path) -> CompetitionFile:
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CompetitionFileError(f"{path}: cannot read file: {exc}") from exc
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise CompetitionFileError(f"{path}: invalid YAML: {exc}") from exc
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise CompetitionFileError(f"{path}: (top level): must be a mapping, got {type(raw).__name__}")
    problems = raw.get("problems")
    if problems is None:
        problems = []
    if not isinstance(problems, list):
        raise CompetitionFileError(f"{path}: problems: must be a list, got {type(problems).__name__}")
    default_harness = raw.get("harness")
    if default_harness is not None and default_harness not in HARNESS_CHOICES:
        raise CompetitionFileError(f"{path}: harness: must be one of {', '.join(HARNESS_CHOICES)}, "
                                   f"got {default_harness!r}")
    entries = [_entry(path, index, item, default_harness) for index, item in enumerate(problems)]
    precheck, problem = _outcomes(raw.get("precheck"), f"{path}: precheck")
    if problem:
        raise CompetitionFileError(problem)
    return CompetitionFile(path=path, set_name=path.stem, title=str(raw.get("name") or path.stem), entries=entries,
                           precheck=precheck)


def _outcomes(value: Any, where: str) -> tuple[dict[str, str] | None, str | None]:
    """A `precheck:` mapping of rule name to outcome, checked for shape only (the rules are the platform's)."""
    if value is None:
        return None, None
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return None, f"{where}: must be a mapping of rule name to outcome, got {value!r}"
    return dict(value), None


def _entry(path: Path, index: int, item: Any, default_harness: str | None = None) -> CompetitionEntry:
    where = f"{path.name}: problems[{index}]"
    if not isinstance(item, dict):
        return CompetitionEntry(None, None, None, None, f"{where}: must be a mapping, got {type(item).__name__}")
    name, directory = item.get("name"), item.get("directory")
    name = str(name).strip() if name not in (None, "") else None
    directory = str(directory).strip() if directory not in (None, "") else None
    deadline = item.get("deadline")
    deadline = deadline if isinstance(deadline, datetime) else (None if deadline is None else str(deadline))
    gpus, problem = item.get("gpus"), None
    if gpus is not None and (not isinstance(gpus, list) or not all(isinstance(g, str) and g for g in gpus)):
        problem = f"{where}.gpus: must be a list of GPU names, got {gpus!r}"
        gpus = None
    harness = item.get("harness", default_harness)
    if harness is not None and harness not in HARNESS_CHOICES:
        problem = f"{where}.harness: must be one of {', '.join(HARNESS_CHOICES)}, got {harness!r}"
        harness = None
    precheck, wrong = _outcomes(item.get("precheck"), f"{where}.precheck")
    return CompetitionEntry(name, directory, deadline, list(gpus) if gpus else None, problem or wrong, precheck,
                            harness)
