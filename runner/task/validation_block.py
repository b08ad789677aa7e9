"""task.yml's `validation:` block (docs/authoring.md "Application validation"), in either of its two forms, checked
and turned into the stored TaskValidation. Errors are FieldErrors naming the key; runner.task.taskfile names the file.

The short form is the one upstream KernelBot reads: `version` and `script`. The long form, which reference-kernels'
Cholesky problem has also used, lists the validation's own files and says how to run it.
"""

from __future__ import annotations

import math
import zoneinfo
from pathlib import Path
from typing import Any

from runner.task.sources import load_files, read_source
from runner.task.taskcheck import FieldError, check_int, expect
from schemas.contracts import SUBMISSION_MARKER
from schemas.task_validation import SHORT_FORM_MAIN, TaskValidation, ValidationSchedule

SHORT_KEYS = ("version", "script")
LONG_KEYS = ("name", "version", "main", "files", "timeout", "top_k", "max_concurrency", "schedule", "settings",
             "shapes")
SCHEDULE_KEYS = ("hour", "minute", "timezone")
FIELD = "validation"


def check_validation(raw: Any, directory: Path, root: Path, task_files: dict[str, str]) -> TaskValidation | None:
    if raw is None:
        return None
    block = expect(FIELD, raw, dict)
    if "script" in block:
        return _short_form(block, directory, root, task_files)
    return _long_form(block, directory, root)


def _short_form(block: dict, directory: Path, root: Path, task_files: dict[str, str]) -> TaskValidation:
    unknown = sorted(str(key) for key in block if key not in SHORT_KEYS)
    if unknown:
        raise FieldError(f"{FIELD}.{unknown[0]}", "unknown key beside `script` (the short form has only version and "
                                                  "script; the long form names `main` and lists `files` instead)")
    version = _version(block)
    script = expect(f"{FIELD}.script", block["script"], str)
    source = read_source(f"{FIELD}.script", directory, script, root)
    if task_files.get(SHORT_FORM_MAIN, source) != source:
        # upstream writes the script over the task's file of that name: one of the two would silently be lost
        raise FieldError(f"{FIELD}.script", f"the task's files have another {SHORT_FORM_MAIN!r}, which the script "
                                            "would replace in the validation's run directory")
    return TaskValidation(version=version, main=SHORT_FORM_MAIN, files={SHORT_FORM_MAIN: source},
                          includes_task_files=True)


def _long_form(block: dict, directory: Path, root: Path) -> TaskValidation:
    unknown = sorted(str(key) for key in block if key not in LONG_KEYS)
    if unknown:
        raise FieldError(f"{FIELD}.{unknown[0]}", f"unknown key (allowed: {', '.join(LONG_KEYS)}; or the short "
                                                  "form: version and script)")
    version = _version(block)
    for key in ("main", "files"):
        if block.get(key) is None:
            raise FieldError(f"{FIELD}.{key}", "required without `script` (the long form names its entry point and "
                                               "lists its files)")
    files = load_files(f"{FIELD}.files", directory, block["files"], root)
    main = expect(f"{FIELD}.main", block["main"], str)
    if main not in files:
        raise FieldError(f"{FIELD}.main", f"{main!r} is not the name of an entry in validation.files")
    if files[main] == SUBMISSION_MARKER:
        raise FieldError(f"{FIELD}.main", f"{main!r} is the submission, not a validation script")
    return TaskValidation(
        version=version, main=main, files=files, name=expect(f"{FIELD}.name", block.get("name", ""), str),
        timeout=_positive(block, "timeout", 900), top_k=_positive(block, "top_k", 10),
        max_concurrency=_positive(block, "max_concurrency", 2), schedule=_schedule(block.get("schedule")),
        settings=_json_mapping(f"{FIELD}.settings", block.get("settings") or {}),
        shapes=[_json_mapping(f"{FIELD}.shapes[{index}]", shape)
                for index, shape in enumerate(expect(f"{FIELD}.shapes", block.get("shapes") or [], list))],
    )


def _version(block: dict) -> str:
    version = block.get("version")
    if not isinstance(version, str) or not version.strip():
        raise FieldError(f"{FIELD}.version", f"must be a non-empty string (quote a number: \"2\"), got {version!r}")
    return version


def _positive(block: dict, key: str, default: int) -> int:
    value = check_int(f"{FIELD}.{key}", block.get(key, default))
    if value < 1:
        raise FieldError(f"{FIELD}.{key}", f"must be an integer >= 1, got {value}")
    return value


def _schedule(raw: Any) -> ValidationSchedule | None:
    if raw is None:
        return None
    where = f"{FIELD}.schedule"
    schedule = expect(where, raw, dict)
    unknown = sorted(str(key) for key in schedule if key not in SCHEDULE_KEYS)
    if unknown:
        raise FieldError(f"{where}.{unknown[0]}", f"unknown key (allowed: {', '.join(SCHEDULE_KEYS)})")
    hour = check_int(f"{where}.hour", schedule.get("hour"))
    minute = check_int(f"{where}.minute", schedule.get("minute", 0))
    if not 0 <= hour <= 23 or not 0 <= minute <= 59:
        raise FieldError(where, f"{hour:02}:{minute:02} is not a time of day (hour 0-23, minute 0-59)")
    timezone = expect(f"{where}.timezone", schedule.get("timezone"), str)
    try:
        zoneinfo.ZoneInfo(timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError) as exc:  # a directory of zones is an OSError
        raise FieldError(f"{where}.timezone", f"{timezone!r} is not an IANA time zone (say America/Los_Angeles)") \
            from exc
    return ValidationSchedule(hour=hour, minute=minute, timezone=timezone)


def _json_mapping(where: str, raw: Any) -> dict[str, Any]:
    mapping = expect(where, raw, dict)
    return {_key(where, key): _json(f"{where}.{key}", value) for key, value in mapping.items()}


def _key(where: str, key: Any) -> str:
    if not isinstance(key, str):
        raise FieldError(where, f"keys must be strings, got {key!r}")
    return key


def _json(where: str, value: Any) -> Any:
    """The value as JSON can carry it to the script: YAML's dates and non-finite numbers cannot."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise FieldError(where, f"must be a finite number, got {value!r}")
        return value
    if isinstance(value, list):
        return [_json(f"{where}[{index}]", item) for index, item in enumerate(value)]
    if isinstance(value, dict):
        return _json_mapping(where, value)
    raise FieldError(where, f"must be a number, a string, a boolean, a list or a mapping, got {type(value).__name__} "
                            f"{value!r} (quote dates)")
