"""The harness -> runner protocol (docs/authoring.md): result lines, tamper rules, output truncation."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

OUTPUT_LIMIT = 16_384
TAMPERING_ERROR = "result channel tampering"


@dataclass
class StageVerdict:
    """The parsed result map of one stage and whether it may count as passed."""

    result: dict[str, str] = field(default_factory=dict)
    passed: bool = False


def decode_output(raw: bytes) -> str:
    """Harness output as text; invalid UTF-8 is replaced rather than failing the whole run."""
    return raw.decode("utf-8", errors="replace")


def truncate_output(text: str, limit: int = OUTPUT_LIMIT, extra_lines: int = 0) -> str:
    """Keep whole lines while the running length (line + 1 each) plus 100 stays within `limit`; replace the rest by
    `[...] N lines omitted`. `extra_lines` counts lines that were already dropped before decoding (capture cap)."""
    if len(text) <= limit and extra_lines == 0:
        return text
    lines = text.split("\n")
    kept: list[str] = []
    running = 0
    for line in lines:
        if running + len(line) + 1 + 100 > limit:
            break
        running += len(line) + 1
        kept.append(line)
    omitted = len(lines) - len(kept) + extra_lines
    if omitted == 0:
        return text
    return "\n".join(kept + [f"[...] {omitted} lines omitted"])


def parse_result_lines(text: str) -> tuple[dict[str, str], bool]:
    """Split `key: value` lines at the first colon. Returns the map and whether the channel was tampered with:
    a key written twice (the first value is kept) or any line after `check`."""
    result: dict[str, str] = {}
    tampered = False
    check_seen = False
    for line in text.splitlines():
        if not line.strip():
            continue
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if check_seen or key in result:
            tampered = True
            if key in result:
                continue
        result[key] = value
        if key == "check":
            check_seen = True
    return result, tampered


def judge_stage(text: str, stage: str, expected_cases: int | None) -> StageVerdict:
    """Parse one stage's result channel and decide `passed`.

    Beyond upstream's `check == pass` we require the result to be consistent with the case file the runner wrote
    (counts and per-case verdicts). This is a best-effort defence against user code that forges lines on the result
    fd while sharing the harness process; the real defence is the supervisor/worker split of docs/authoring.md.
    `expected_cases` None skips the count comparison (e.g. harnesses known to report a different count).
    """
    result, tampered = parse_result_lines(text)
    if tampered:
        result["error"] = TAMPERING_ERROR
        return StageVerdict(result=result, passed=False)
    if result.get("check") != "pass":
        return StageVerdict(result=result, passed=False)
    problem = _inconsistency(result, stage, expected_cases)
    if problem:
        result["error"] = f"result channel inconsistent: {problem}"
        return StageVerdict(result=result, passed=False)
    return StageVerdict(result=result, passed=True)


def _inconsistency(result: dict[str, str], stage: str, expected_cases: int | None) -> str:
    if stage == "test":
        return _count_problem(result, "test-count", expected_cases) or next(
            (f"test.{i}.status is not pass" for i in range(_count(result, "test-count"))
             if result.get(f"test.{i}.status") != "pass"),
            "",
        )
    if stage in ("benchmark", "leaderboard"):
        return _count_problem(result, "benchmark-count", expected_cases) or next(
            (f"benchmark.{i} has no passing statistics" for i in range(_count(result, "benchmark-count"))
             if result.get(f"benchmark.{i}.status", "pass") != "pass" or f"benchmark.{i}.mean" not in result),
            "",
        )
    return ""


def _count(result: dict[str, str], key: str) -> int:
    try:
        return int(result.get(key, ""))
    except ValueError:
        return -1


def _count_problem(result: dict[str, str], key: str, expected: int | None) -> str:
    count = _count(result, key)
    if count < 0:
        return f"{key} missing or not an integer"
    if expected is not None and count != expected:
        return f"{key} is {count} but the case file holds {expected} cases"
    return ""


def parse_sample_lines(text: str) -> dict[str, Any]:
    """Bulk data from POPCORN_DATA_FD: JSON lines `{"key": ..., "samples_ns": [...], ...}`.

    Returns key -> the object without its key. Lines that are not such objects are ignored: this channel carries
    supplementary data only and never decides a verdict.
    """
    samples: dict[str, Any] = {}
    for line in text.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("key"), str):
            key = obj.pop("key")
            samples.setdefault(key, obj)
    return samples
