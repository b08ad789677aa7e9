"""Telemetry around timed stages (docs/authoring.md): each GPU's temperature, clocks, power and slowdown reasons
read through NVML just before and just after the stage, outside its timed window. A stage during which a GPU
reported a thermal, power or hardware slowdown is `throttled`, and its report says so
(services.core.presentation.longreport)."""

from __future__ import annotations

from collections.abc import Callable

from runner.host import nvml
from schemas.contracts import EvalResult, StageTelemetry, TelemetrySample

TIMED_STAGES = ("benchmark", "leaderboard")


def stage_telemetry(before: list[TelemetrySample] | None, after: list[TelemetrySample] | None) -> StageTelemetry:
    if before is None and after is None:
        return StageTelemetry()  # no NVML here (a CPU host): nothing measured, nothing flagged
    reasons = sorted({reason for sample in (before or []) + (after or []) for reason in sample.throttle_reasons})
    return StageTelemetry(source="nvml", before=before or [], after=after or [], throttled=bool(reasons),
                          throttle_reasons=reasons)


def measured(stage: str, run: Callable[[], EvalResult]) -> EvalResult:
    """Run a stage; a timed one comes back with its telemetry before and after."""
    if stage not in TIMED_STAGES:
        return run()
    before = nvml.telemetry()
    evaluation = run()
    return evaluation.model_copy(update={"telemetry": stage_telemetry(before, nvml.telemetry())})
