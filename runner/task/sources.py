"""Reading the files a task.yml names (docs/authoring.md "task.yml"): run-directory file lists and the sources they
point at, each kept inside the checkout. Shared by the task's own `files`, its templates and its validation's files.
Errors are FieldErrors naming the field; runner.task.taskfile names the file."""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

from runner.task.taskcheck import FieldError, expect
from schemas.contracts import SUBMISSION_MARKER


def load_files(field: str, directory: Path, raw: Any, root: Path) -> dict[str, str]:
    """A `files:` list: run-directory name -> inlined content, exactly one entry holding the submission marker."""
    entries = expect(field, raw, list)
    files: dict[str, str] = {}
    for index, entry in enumerate(entries):
        where = f"{field}[{index}]"
        entry = expect(where, entry, dict)
        extra = sorted(str(key) for key in entry if key not in ("name", "source"))
        if extra:
            raise FieldError(f"{where}.{extra[0]}", "unknown key (allowed: name, source)")
        name = check_run_file_name(f"{where}.name", entry.get("name"))
        if name in files:
            raise FieldError(f"{where}.name", f"duplicate file name {name!r}")
        source = expect(f"{where}.source", entry.get("source"), str)
        if source != SUBMISSION_MARKER:
            source = read_source(f"{where}.source", directory, source, root)
        files[name] = source
    markers = [name for name, content in files.items() if content == SUBMISSION_MARKER]
    if len(markers) != 1:
        raise FieldError(field, f"exactly one entry must have source {SUBMISSION_MARKER}, found {len(markers)}")
    return files


def check_run_file_name(where: str, name: Any) -> str:
    name = expect(where, name, str)
    path = PurePosixPath(name)
    if not name or "\\" in name or "\0" in name or path.is_absolute() or ".." in path.parts or name.endswith("/"):
        raise FieldError(where, f"must be a plain relative path without '..', got {name!r}")
    return name


def read_source(where: str, directory: Path, relative: str, root: Path) -> str:
    """The text of `relative` (to the task.yml's directory), which must stay inside `root`."""
    if not relative or Path(relative).is_absolute():
        raise FieldError(where, f"must be a path relative to the task.yml directory, got {relative!r}")
    resolved = (directory / relative).resolve()
    if not resolved.is_relative_to(root):
        raise FieldError(where, f"{relative!r} resolves outside the checkout root {root}")
    if not resolved.is_file():
        raise FieldError(where, f"{relative!r} is not a file in {directory}")
    try:
        # Sources may carry a submission-looking marker as ordinary text; only the exact marker means "submission".
        content = resolved.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FieldError(where, f"cannot read {relative!r} as UTF-8 text: {exc}") from exc
    if content == SUBMISSION_MARKER:
        raise FieldError(where, f"{relative!r} contains only the submission marker")
    return content
