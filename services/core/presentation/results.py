"""FullResult per run, rebuilt from the read model for streamed clients (docs/http-api.md "The streaming submit"). Pure.

A run is one row of run_requests (one payload on one GPU) and its harness stages are rows of runs. Secret runs keep
their structure and types, but what could reveal the secret inputs is blanked (docs/security.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from schemas.contracts import SystemInfo

FINISHED = ("completed", "failed")


@dataclass(frozen=True)
class RunOutcome:
    gpu: str
    backend: str
    mode: str
    secret: bool
    completed: bool  # the runner reported a result (False: it never ran, or was lost)
    result: dict[str, Any]  # FullResult


def _redacted(evaluation: dict[str, Any]) -> dict[str, Any]:
    compilation, run = evaluation.get("compilation"), evaluation.get("run")
    if compilation is not None:
        compilation = {**compilation, "command": "", "stdout": "", "stderr": ""}
    if run is not None:
        run = {**run, "command": "", "stdout": "", "stderr": "", "result": {}}
    return {**evaluation, "compilation": compilation, "run": run, "profile": None}


def eval_result(evaluation: dict[str, Any], *, secret: bool) -> dict[str, Any]:
    """The EvalResult of one stage in the shape of docs/http-api.md "The streaming submit" (bulk samples and harness
    extras stay on the server)."""
    shaped = {key: evaluation.get(key) for key in ("start", "end", "compilation", "run", "profile")}
    return _redacted(shaped) if secret else shaped


def _order(gpus: list[str]):
    position = {gpu: i for i, gpu in enumerate(gpus)}
    return lambda request: (position.get(request["gpu"], len(position)), bool(request["secret"]), request["run_id"])


def outcomes(requests, stages, gpus: list[str]) -> list[RunOutcome]:
    """One outcome per finished run: in the submission's GPU order, public before secret per GPU."""
    by_run: dict[str, list] = {}
    for stage in stages:
        by_run.setdefault(stage["run_id"], []).append(stage)
    found = []
    for request in sorted((r for r in requests if r["status"] in FINISHED), key=_order(gpus)):
        stage_rows = by_run.get(request["run_id"], [])
        completed = request["status"] == "completed"
        success = request["success"] if request["success"] is not None else completed
        error = request["result_error"] or ("" if completed else request["error"] or "")
        system = request["system"] or (stage_rows[0]["system"] if stage_rows else None) or SystemInfo().model_dump()
        runs = {row["stage"]: eval_result(row["result"], secret=request["secret"]) for row in stage_rows}
        found.append(RunOutcome(
            gpu=request["gpu"], backend=request["backend"] or "", mode=request["mode"], secret=request["secret"],
            completed=completed, result={"success": bool(success), "error": error, "system": system, "runs": runs},
        ))
    return found
