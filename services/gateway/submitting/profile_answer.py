"""The terminal SSE event of `POST /profile/{leaderboard}/{gpu}` (docs/quickstart.md, "Profiling"). Pure.

It is what released popcorn-cli reads (tests/support/popcorn_profile.py says exactly what): the streaming submit's
`result` event, each result (one per run) with `success`, `system`, `profile_metadata` and its runs keyed
`profile.<i>`, each run's `profile.trace` the case's zip inline as base64, whatever its size up to MAX_TRACE_CHARS.
Beside it, as an addition, each stage's `profile.download_url` and `artifacts`: one signed, expiring download link per
case, named `profile.<i>-<case>.zip`. A failed or empty capture, or a trace over the limit, ends the stream with an
`error` event instead, as upstream's route does: never a result the client would refuse.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import zipfile
from collections.abc import Callable
from typing import Any

from services.core.presentation import reports
from services.core.presentation.results import RunOutcome
from services.gateway.submitting import sse

# One case's zip may be up to 32 MiB, the runner's own limit (runner/profilers/bundle.py, MAX_ZIP_BYTES); its
# base64 is 4/3 of that. A trace over it (from a runner that does not enforce the limit) is an error, never a link.
MAX_ZIP_BYTES = 32 * 1024 * 1024
MAX_TRACE_CHARS = 4 * -(-MAX_ZIP_BYTES // 3)
MANIFEST = "manifest.json"
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
    trace = (stage.get("profile") or {}).get("trace") or ""
    if not trace:
        return f"{key} captured no profile"
    if len(trace) > MAX_TRACE_CHARS:
        return (f"{key}'s profile is {len(trace) * 3 / 4 / 2**20:.1f} MiB, over the {MAX_ZIP_BYTES >> 20} MiB one "
                f"case may carry: capture fewer kernels (--ncu-launch-count, --ncu-kernel-name) or one case "
                f"(--benchmark-index)")
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


def _archive(trace: str) -> tuple[list[str], dict[str, Any]]:
    """The names in a case's zip and its manifest ({} where there is none)."""
    try:
        with zipfile.ZipFile(io.BytesIO(base64.b64decode(trace))) as archive:
            names = archive.namelist()
            manifest = next((json.loads(archive.read(name)) for name in names if name.endswith("/" + MANIFEST)), {})
    except (binascii.Error, ValueError, zipfile.BadZipFile, KeyError):
        return [], {}
    return names, manifest if isinstance(manifest, dict) else {}


def zip_folder(trace: str, fallback: str) -> str:
    """The folder inside a case's zip (`profile.0-n-1024`), which names the download."""
    names, _ = _archive(trace)
    return names[0].split("/")[0] if names and "/" in names[0] else fallback


def profile_metadata(manifests: list[dict[str, Any]]) -> dict[str, Any]:
    """upstream KernelBot's `FullResult.profile_metadata`, from the cases' manifests (runner/profilers/bundle.py):
    the capture options as popcorn-cli names them, each profiled case by index, and the configuration's sha256."""
    first = manifests[0] if manifests else {}
    return {
        "capture_options": first.get("capture_options", {}),
        "benchmark_specs": {str((m.get("benchmark") or {}).get("index")): (m.get("benchmark") or {}).get("case")
                            for m in manifests if m.get("benchmark")},
        "config_sha256": first.get("config_sha256"),
    }


def result_event(submission_id: int, job_status: str, outcomes: list[RunOutcome], make_link: MakeLink) -> bytes:
    artifacts, results = [], []
    for outcome in outcomes:
        runs, manifests = dict(outcome.result.get("runs") or {}), []
        for key, stage in profile_stages(outcome):
            profile = stage.get("profile") or {}
            trace = profile.get("trace") or ""
            names, manifest = _archive(trace)
            manifests.append(manifest)
            url = make_link(outcome.gpu, key)
            folder = names[0].split("/")[0] if names and "/" in names[0] else key
            artifacts.append({"name": f"{folder}.zip", "url": url, "gpu": outcome.gpu, "stage": key,
                              "profiler": profile.get("profiler", ""), "size": len(base64.b64decode(trace)),
                              "inline": True})
            runs[key] = {**stage, "profile": {**profile, "trace": trace, "download_url": url}}
        results.append({**outcome.result, "system": outcome.result.get("system") or {},
                        "profile_metadata": profile_metadata(manifests), "runs": runs})
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
