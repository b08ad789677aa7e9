"""The terminal SSE event of `POST /profile/{leaderboard}/{gpu}` (docs/quickstart.md, "Profiling"). Pure.

It is the streaming submit's `result` event (runs keyed `profile.<i>`, each with its ProfileResult, and the
reports), plus `artifacts`: one signed, expiring download link per profiled case, named as popcorn-cli saves it
(`profile.<i>-<case>.zip`). A trace over INLINE_TRACE_LIMIT leaves the answer (its `trace` is empty) and is offered
by its link only. A failed or empty capture ends the stream with an `error` event instead, as upstream's route does.
"""

from __future__ import annotations

import base64
import binascii
import io
import zipfile
from collections.abc import Callable
from typing import Any

from services.core.presentation import reports
from services.core.presentation.results import RunOutcome
from services.gateway.submitting import sse

# base64 characters of one case's zip kept inline in the answer
INLINE_TRACE_LIMIT = 512 * 1024
MakeLink = Callable[[str, str], str]  # (gpu, stage) -> URL


def profile_stages(outcome: RunOutcome) -> list[tuple[str, dict[str, Any]]]:
    runs = outcome.result.get("runs") or {}
    return sorted(((key, stage) for key, stage in runs.items() if key.startswith("profile")),
                  key=lambda item: int(item[0].removeprefix("profile.") or 0))


def stage_failure(key: str, stage: dict[str, Any]) -> str | None:
    run, compilation = stage.get("run"), stage.get("compilation")
    if run is None:
        if compilation and not compilation.get("success", True):
            return f"Compilation failed: {(compilation.get('stderr') or '').strip()[-2000:]}"
        return f"{key} did not run"
    result = run.get("result") or {}
    if not (run.get("success") and run.get("passed")):
        reason = result.get("error") or result.get("benchmark.0.error") or f"exit code {run.get('exit_code')}"
        stderr = (run.get("stderr") or "").strip()
        return f"{key} failed: {reason}" + (f"\n{stderr[-1500:]}" if stderr and "error" not in result else "")
    if not (stage.get("profile") or {}).get("trace"):
        return f"{key} captured no profile"
    return None


def failure(outcomes: list[RunOutcome]) -> tuple[int, str] | None:
    """(status code, detail) of a profile that failed, else None."""
    for outcome in outcomes:
        if not outcome.result.get("success"):
            return 502, f"Runner error on {outcome.gpu}: {outcome.result.get('error') or 'no result'}"
        stages = profile_stages(outcome)
        if not stages:
            return 502, f"No case was profiled on {outcome.gpu}"
        for key, stage in stages:
            reason = stage_failure(key, stage)
            if reason:
                return 400, f"Profiling failed on {outcome.gpu}: {reason}"
    return None


def zip_folder(trace: str, fallback: str) -> str:
    """The folder inside a case's zip (`profile.0-n-1024`), which names the download."""
    try:
        with zipfile.ZipFile(io.BytesIO(base64.b64decode(trace))) as archive:
            names = archive.namelist()
    except (binascii.Error, ValueError, zipfile.BadZipFile):
        return fallback
    return names[0].split("/")[0] if names and "/" in names[0] else fallback


def result_event(submission_id: int, job_status: str, outcomes: list[RunOutcome], make_link: MakeLink) -> bytes:
    artifacts, results = [], []
    for outcome in outcomes:
        runs = dict(outcome.result.get("runs") or {})
        for key, stage in profile_stages(outcome):
            profile = stage.get("profile") or {}
            trace = profile.get("trace") or ""
            url = make_link(outcome.gpu, key)
            artifacts.append({"name": f"{zip_folder(trace, key)}.zip", "url": url, "gpu": outcome.gpu, "stage": key,
                              "profiler": profile.get("profiler", ""), "size": len(trace) * 3 // 4,
                              "inline": len(trace) <= INLINE_TRACE_LIMIT})
            kept = trace if len(trace) <= INLINE_TRACE_LIMIT else ""
            runs[key] = {**stage, "profile": {**profile, "trace": kept, "download_url": url}}
        results.append({**outcome.result, "runs": runs})
    return sse.frame("result", {
        "status": "success", "submission_id": submission_id, "job_status": job_status, "results": results,
        "reports": [reports.report(o.gpu, o.backend, o.mode, secret=o.secret, result=o.result) for o in outcomes],
        "artifacts": artifacts,
    })


def final_event(submission_id: int, state: sse.JobState, outcomes: list[RunOutcome], *, make_link: MakeLink) -> bytes:
    ended_early = (state.deleted or state.rejected or state.job_status in ("hacked", "timed_out")
                   or not any(o.completed for o in outcomes))
    if ended_early:
        return sse.final_event(submission_id, state, outcomes)
    failed = failure(outcomes)
    if failed is not None:
        return sse.error_event(submission_id, *failed)
    return result_event(submission_id, state.job_status or "succeeded", outcomes, make_link)
