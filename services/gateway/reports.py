"""Report texts of a run: the title and the short `> ` status lines of harness.md §9.1. Pure.

The long report of §9.2 (system info, test logs, benchmark tables) is not rendered yet; every run, public or
secret, gets the title and its short lines.
"""

from __future__ import annotations

from typing import Any

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
    """Status lines in order, stopping at the first failure (§9.1)."""
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
        for stage in stages:
            line, ok = _stage_line(runs[stage], what, failed, passed)
            lines.append(line)
            if not ok:
                return lines
    return lines


def report(gpu: str, backend: str, mode: str, *, secret: bool, result: dict[str, Any]) -> str:
    """Title and short lines of one FullResult; a run the runner could not complete shows only its error."""
    if not result.get("success"):
        return f"{title(gpu, backend, secret=secret, success=False)}\n> {result.get('error') or 'runner failed'}"
    lines = short_lines(result.get("runs", {}), ranked=mode in RANKED_MODES or secret)
    return "\n".join([title(gpu, backend, secret=secret, success=True), *(f"> {line}" for line in lines)])
