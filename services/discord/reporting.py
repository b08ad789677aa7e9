"""A run's reports for Discord, built by the one report module the gateway uses (services.core.reports). Pure.

The result is shaped exactly as the gateway rebuilds it from the read model (services.core.results), so a
thread shows the same report as a popcorn-cli client gets for the same run.
"""

from __future__ import annotations

from typing import Any

from schemas.events import RunCompleted
from services.core import reports
from services.core.results import eval_result


def run_result(event: RunCompleted) -> dict[str, Any]:
    result = event.result
    return {
        "success": result.success, "error": result.error, "system": result.system.model_dump(mode="json"),
        "runs": {stage: eval_result(evaluation.model_dump(mode="json"), secret=event.secret)
                 for stage, evaluation in result.runs.items()},
    }


def status_report(gpu: str, backend: str, mode: str, secret: bool, result: dict[str, Any]) -> str:
    return reports.status_text(gpu, backend, mode, secret=secret, result=result)


def thread_messages(gpu: str, backend: str, mode: str, result: dict[str, Any]) -> tuple[list[str], list[reports.File]]:
    """The long report of a public run cut under Discord's message limit, and the files it carries."""
    text = reports.report(gpu, backend, mode, secret=False, result=result)
    files = [part for part in reports.long_report(result) if isinstance(part, reports.File)] \
        if result.get("success") else []
    return reports.chunk(text), files


def thread_name(submission_id: int, mode: str, gpu: str) -> str:
    return f"Submission {submission_id}: {mode} on {gpu}"[:100]
