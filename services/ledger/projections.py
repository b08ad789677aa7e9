"""Pure projection logic: what rows an event becomes. No I/O here."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from schemas.contracts import FullResult
from schemas.events import RunCompleted

TERMINAL_JOB_STATUSES = frozenset({"succeeded", "failed", "timed_out", "hacked"})


@dataclass(frozen=True)
class StageRow:
    run_id: str
    stage: str
    submission_id: int
    gpu: str
    secret: bool
    passed: bool
    result: dict
    system: dict
    harness_version: str
    start_time: datetime | None
    end_time: datetime | None


def _parse_ts(value: str | None) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def stage_rows(event: RunCompleted) -> list[StageRow]:
    """One row per harness stage of a completed run, in the order the stages ran."""
    result: FullResult = event.result
    rows = []
    for stage, evaluation in result.runs.items():
        run = evaluation.run
        passed = bool(run and run.success and run.passed)
        rows.append(
            StageRow(
                run_id=event.run_id,
                stage=stage,
                submission_id=event.submission_id,
                gpu=event.gpu,
                secret=event.secret,
                passed=passed,
                result=evaluation.model_dump(mode="json"),
                system=result.system.model_dump(mode="json"),
                harness_version=(run.result.get("harness-version", "") if run else ""),
                start_time=_parse_ts(evaluation.start),
                end_time=_parse_ts(evaluation.end),
            )
        )
    return rows
