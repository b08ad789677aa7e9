"""A run's reports for Discord, built by the one report module the gateway uses (services.core.presentation.reports).
Pure.

The result is shaped exactly as the gateway rebuilds it from the read model (services.core.presentation.results), so a
thread shows the same report as a popcorn-cli client gets for the same run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from schemas.events import RunCompleted
from services.core.presentation import reports
from services.core.presentation.results import eval_result

ProfileLink = Callable[[str, str], str]  # (gpu, stage) -> the artifact's download link


def run_result(event: RunCompleted) -> dict[str, Any]:
    result = event.result
    return {
        "success": result.success, "error": result.error, "system": result.system.model_dump(mode="json"),
        "runs": {stage: eval_result(evaluation.model_dump(mode="json"), secret=event.secret)
                 for stage, evaluation in result.runs.items()},
    }


def status_report(gpu: str, backend: str, mode: str, secret: bool, result: dict[str, Any]) -> str:
    return reports.status_text(gpu, backend, mode, secret=secret, result=result)


def thread_messages(gpu: str, backend: str, mode: str, result: dict[str, Any],
                    profile_link: ProfileLink | None = None) -> tuple[list[str], list[reports.File]]:
    """The long report of a public run cut under Discord's message limit, and the files it carries; a profile's
    report ends with the download link of each case's artifact, the one popcorn-cli gets."""
    text = reports.report(gpu, backend, mode, secret=False, result=result)
    files = [part for part in reports.long_report(result) if isinstance(part, reports.File)] \
        if result.get("success") else []
    return reports.chunk(text + artifact_lines(gpu, result, profile_link)), files


def artifact_lines(gpu: str, result: dict[str, Any], profile_link: ProfileLink | None) -> str:
    stages = sorted(stage for stage, evaluation in (result.get("runs") or {}).items()
                    if stage.startswith("profile.") and (evaluation or {}).get("profile"))  # traces are kept apart
    if profile_link is None or not stages:
        return ""
    lines = [f"* `{stage}`: <{profile_link(gpu, stage)}>" for stage in stages]
    return "\n\n**Profile artifacts** (for you and the admins; the links expire):\n" + "\n".join(lines)


def thread_name(submission_id: int, mode: str, gpu: str) -> str:
    return f"Submission {submission_id}: {mode} on {gpu}"[:100]
