"""Report texts of a run (docs/quickstart.md): the title, the short `> ` status lines, the long report rendered as
markdown, and splitting a report into messages under a size limit. Pure; the one report module of the gateway and
the Discord bot.

A secret run only ever gets its title and short lines: its logs and statistics would reveal the secret inputs.
"""

from __future__ import annotations

import re
from typing import Any

from services.core.presentation.longreport import File, Link, Log, Part, Text, fenced, format_time, long_report

__all__ = ["File", "Link", "Log", "Part", "Text", "chunk", "format_time", "long_report", "render_text", "report",
           "short_lines", "status_text", "title"]
DISCORD_LIMIT = 2000

BACKEND_LABELS = {"modal": "Modal", "github": "GitHub", "buildkite": "Buildkite", "slurm": "Slurm"}
RANKED_MODES = ("leaderboard", "private")
# (stage key, what runs in it, its failed verdict, its passed verdict, missing line in a ranked run)
CHAIN = (
    ("test", "tests", "Testing failed", "Testing successful", "Tests missing"),
    ("benchmark", "benchmarks", "Benchmarking failed", "Benchmarking successful", "Benchmarks missing"),
    ("profile", "profile", "Profiling failed", "Profiling successful", None),
    ("leaderboard", "leaderboard", "Leaderboard run failed", "Leaderboard run successful", "Leaderboard missing"),
)


def backend_label(backend: str) -> str:
    return BACKEND_LABELS.get(backend.lower(), backend or "unknown backend")


def title(gpu: str, backend: str, *, secret: bool, success: bool) -> str:
    verdict = "✅ success" if success else "❌ failure"
    return f"**{gpu} on {backend_label(backend)}{' (secret)' if secret else ''} {verdict}**"


def exit_reason(exit_code: int) -> str:
    if exit_code == 114:
        return " (timeout)"
    if exit_code == 110:
        return " (cuda api error)"
    if exit_code in (0, 112):
        return ""
    return f" (internal error {exit_code})"


def _stage_line(evaluation: dict[str, Any], what: str, failed: str, passed: str) -> tuple[str, bool]:
    run = evaluation.get("run")
    if run is None or not run.get("success"):
        reason = exit_reason(run.get("exit_code", 0)) if run else ""
        return f"❌ Running {what} failed{reason}", False
    if not run.get("passed"):
        return f"❌ {failed}", False
    return f"✅ {passed}", True


def _profile_index(stage: str) -> tuple[int, str]:
    index = stage.removeprefix("profile.")
    return (int(index), "") if index.isdigit() else (1 << 30, index)


def short_lines(runs: dict[str, dict[str, Any]], *, ranked: bool) -> list[str]:
    """Status lines in order, stopping at the first failure (docs/quickstart.md "Reading a report")."""
    compilations = [e["compilation"] for e in runs.values() if e.get("compilation")]
    if any(not c.get("success") for c in compilations):
        return ["❌ Compilation failed"]
    lines = ["✅ Compilation successful"] if compilations else []
    for key, what, failed, passed, missing in CHAIN:
        if key == "profile":
            stages = sorted((k for k in runs if k.startswith("profile.")), key=_profile_index)
        else:
            stages = [key] if key in runs else []
        if not stages and ranked and missing:
            return [*lines, f"❌ {missing}"]
        # profile cases are one stage each, but one verdict: the first failure, else one success line
        for stage in stages:
            line, ok = _stage_line(runs[stage], what, failed, passed)
            if not ok:
                return [*lines, line]
        if stages:
            lines.append(f"✅ {passed}")
    return lines


def status_text(gpu: str, backend: str, mode: str, *, secret: bool, result: dict[str, Any]) -> str:
    """Title and short lines of one FullResult; a run the runner could not complete shows only its error."""
    if not result.get("success"):
        return f"{title(gpu, backend, secret=secret, success=False)}\n> {result.get('error') or 'runner failed'}"
    runs = result.get("runs", {})
    lines = short_lines(runs, ranked=mode in RANKED_MODES or secret) + throttled_lines(runs)
    return "\n".join([title(gpu, backend, secret=secret, success=True), *(f"> {line}" for line in lines)])


def throttled_lines(runs: dict[str, dict[str, Any]]) -> list[str]:
    """A flag per timed stage measured while the GPU throttled (secret runs show it too: it reveals no data)."""
    return [f"⚠ GPU throttled during {stage} ({', '.join(e['telemetry'].get('throttle_reasons') or [])})"
            for stage, e in runs.items() if (e.get("telemetry") or {}).get("throttled")]


def report(gpu: str, backend: str, mode: str, *, secret: bool, result: dict[str, Any]) -> str:
    """The report an HTTP client shows (docs/http-api.md "The streaming submit"): status lines, then the long report of
    a public run."""
    status = status_text(gpu, backend, mode, secret=secret, result=result)
    if secret or not result.get("success"):
        return status
    return status + "\n\n" + render_text(long_report(result))


def render_text(parts: list[Part]) -> str:
    """Markdown for HTTP clients: Text verbatim, each Log as a `## <header>:` heading and a code block; Links and
    Files are dropped (docs/quickstart.md "Reading a report")."""
    pieces = []
    for part in parts:
        if isinstance(part, Text):
            pieces.append(part.text)
        elif isinstance(part, Log):
            pieces.append(f"## {part.header}:\n{fenced(part.content.rstrip(chr(10)))}")
    return "\n\n".join(pieces)


FENCE = re.compile(r"(`{3,})(.*)")


def _fence(opener: str) -> str:
    """The fence (three or more backticks) of a line that opened a code block."""
    match = FENCE.match(opener)
    assert match is not None, opener  # openers are lines FENCE matched
    return match.group(1)


def chunk(text: str, limit: int = DISCORD_LIMIT) -> list[str]:
    """Split a report into pieces of at most `limit` characters without breaking code blocks.

    Pieces end at line breaks where possible; a code block cut between pieces is closed at the end of one and
    reopened (same fence and info string) at the start of the next, so every piece renders on its own. A line
    longer than a whole piece is cut hard.
    """
    pieces: list[str] = []
    current: list[str] = []
    opener: str | None = None  # the opening line of the code block the current line is in

    def length(lines: list[str]) -> int:
        return sum(len(line) for line in lines) + max(0, len(lines) - 1)

    def fence_cost() -> int:
        return 1 + len(_fence(opener)) if opener is not None else 0

    def closing(line: str) -> bool:
        match = FENCE.fullmatch(line.strip())
        return bool(opener and match and not match.group(2)
                    and len(match.group(1)) >= len(_fence(opener)))

    def flush() -> None:
        nonlocal current
        if opener is not None and current[-1] == opener and len(current) > 1:
            # the block has just opened: it moves to the next piece whole instead of leaving an empty block here
            pieces.append("\n".join(current[:-1]))
        else:
            pieces.append("\n".join([*current, _fence(opener)] if opener is not None else current))
        current = [opener] if opener is not None else []

    for line in text.split("\n"):
        rest = line
        if closing(line):
            if length([*current, line]) > limit:
                flush()  # the cut closes the block already; do not start an empty one for its closing fence
                current = []
            else:
                current.append(line)
            opener = None
            continue
        while length([*current, rest]) + fence_cost() > limit:
            if len(current) > (1 if opener is not None else 0):
                flush()
                continue
            room = limit - fence_cost() - length([*current, ""])
            if room <= 0:
                raise ValueError("limit is too small to hold a code fence")
            current.append(rest[:room])
            rest = rest[room:]
            flush()
        current.append(rest)
        if opener is None and FENCE.fullmatch(line.strip()):
            opener = line.strip()
    if length(current) and "\n".join(current).strip():
        pieces.append("\n".join(current))
    return [piece for piece in pieces if piece.strip()]
