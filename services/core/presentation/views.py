"""Response shapes of the HTTP API (docs/http-api.md), built from read-model rows. Pure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from runner.task.harness_choice import protection_of
from schemas.contracts import Task
from services.core.rules.noise import Noise

SECRET_HIDDEN_MODES = ("test", "benchmark")


def timestamp(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.isoformat().replace("+00:00", "Z")


def estimated_wait_s(mean_run_s: float | None, runs_ahead: int, running_runs: int) -> float | None:
    """Seconds until a run waiting behind `runs_ahead` others starts, from the mean of the GPU's recent run
    durations: what is ahead and what is running drains at the pace of the runs running now (at least one)."""
    if mean_run_s is None:
        return None
    return round(float(mean_run_s) * (runs_ahead + running_runs) / max(1, running_runs), 1)


def runner_queue(gpu: str, found, now: datetime | None = None) -> dict[str, Any]:
    """The runner-queue object (docs/http-api.md "Public reads") plus queue visibility: for a waiting submission its
    `position` (1 = next) and, for it or for a job submitted now, an estimated wait and start from recent run
    durations."""
    if found is None:
        return {"runner": "unknown", "gpu": gpu, "queued_jobs": None, "running_jobs": None,
                "available_runners": None, "status": "unavailable", "error": "unknown gpu", "position": None,
                "estimated_wait_s": None, "estimated_start": None}
    name, row, for_submission = found
    position, runs_ahead = None, row["queued_runs"]
    if for_submission:
        runs_ahead = row["runs_ahead"] if row["waiting"] else None
        position = row["submissions_ahead"] + 1 if row["waiting"] else None
    wait = None if runs_ahead is None else estimated_wait_s(row["mean_run_s"], runs_ahead, row["running_runs"])
    start = None if wait is None else timestamp((now or datetime.now(UTC)) + timedelta(seconds=wait))
    return {"runner": row["backend"] or "local", "gpu": name, "queued_jobs": row["queued"],
            "running_jobs": row["running"], "available_runners": None, "status": "available", "error": None,
            "position": position, "estimated_wait_s": wait, "estimated_start": start}


def leaderboard(row, *, accessible: bool) -> dict[str, Any]:
    task = dict(row["task"]) if accessible else {}
    return {
        "id": row["id"], "name": row["name"], "description": row["description"] or "", "task": task,
        "deadline": timestamp(row["deadline"]), "gpu_types": sorted(row["gpus"]), "visibility": row["visibility"],
        "creator_id": row["creator_id"], "forum_id": row["forum_id"], "harness": board_harness(row["task"]),
    }


def board_harness(task: dict[str, Any]) -> dict[str, Any]:
    """Whether the board's runs are judged by a protected harness, and why (docs/authoring.md); a platform extension
    of GET /leaderboards. Shown for closed boards too: it says nothing about the task's files."""
    try:
        protected, reason = protection_of(Task.model_validate(dict(task)))
    except ValueError as exc:
        return {"protected": False, "reason": f"the stored task cannot be read: {exc}"}
    return {"protected": protected, "reason": reason}


def stage_run(row) -> dict[str, Any]:
    evaluation = row["result"]
    run = evaluation.get("run") or {}
    view = {
        "start_time": timestamp(row["start_time"]), "end_time": timestamp(row["end_time"]), "mode": row["stage"],
        "secret": row["secret"], "runner": row["gpu"], "score": row["score"], "passed": row["passed"],
    }
    # Secret runs and ranked stages show no harness output to clients (docs/http-api.md "A user's submissions";
    # docs/security.md).
    if not row["secret"] and row["stage"] in SECRET_HIDDEN_MODES:
        view["result"] = run.get("result", {})
    return view


def submission(row, runs, queue: dict | None) -> dict[str, Any]:
    return {
        "id": row["id"], "leaderboard_id": row["leaderboard_id"], "leaderboard_name": row["leaderboard_name"] or "",
        "file_name": row["file_name"], "code": row["code"], "user_id": str(row["user_id"]),
        "submission_time": timestamp(row["submitted_at"]), "done": bool(row["done"]),
        "mode": row["mode"], "gpus": list(row["gpus"]),
        "runs": [stage_run(r) for r in runs],
        "job": {"status": row["job_status"], "error": row["job_error"],
                "last_heartbeat": timestamp(row["job_last_heartbeat"])},
        "runner_queue": queue,
        # the source pre-check's warning, when a rule set to `warn` fired (docs/operations.md)
        "warnings": [row["precheck_warning"]] if row.get("precheck_warning") else [],
    }


def ranking_entry(row, leaderboard_name: str, gpu: str, noise: Noise | None = None) -> dict[str, Any]:
    """One entry of a ranking; with its `noise` (services/core/rules/noise.py), the score's 95% interval in seconds and
    whether it is tied within noise with the entry ranked just above."""
    entry = {
        "submission_id": row["submission_id"], "rank": row["rank"], "submission_name": row["file_name"],
        "submission_time": timestamp(row["submitted_at"]), "submission_score": row["score"],
        "leaderboard_name": leaderboard_name, "user_id": str(row["user_id"]), "user_name": row["user_name"],
        "gpu_type": gpu,
    }
    if noise is not None:
        interval = noise.interval
        entry |= {"score_interval": [interval.low, interval.high] if interval else None,
                  "tied_within_noise": noise.tied_within_noise}
    return entry


def user_submission(row) -> dict[str, Any]:
    """An element of GET /user/submissions (docs/http-api.md "A user's submissions"): ranked results only in `runs`."""
    return {
        "id": row["id"], "leaderboard_name": row["leaderboard_name"] or "", "file_name": row["file_name"],
        "submission_time": timestamp(row["submitted_at"]), "done": bool(row["done"]),
        "runs": [{"gpu_type": run["gpu_type"], "score": run["score"]} for run in row["runs"]],
    }


def rate_limit(row) -> dict[str, Any]:
    return {"id": row["id"], "leaderboard_id": row["leaderboard_id"], "leaderboard_name": row["leaderboard_name"],
            "mode_category": row["mode_category"], "max_submissions_per_hour": row["max_submissions_per_hour"]}


def invite(row) -> dict[str, Any]:
    """popcorn-cli counts an invite as claimed iff `user_id` is a string."""
    return {"code": row["code"], "user_id": None if row["user_id"] is None else str(row["user_id"]),
            "user_name": row["user_name"], "claimed_at": timestamp(row["claimed_at"]),
            "created_at": timestamp(row["created_at"])}


def admin_run(row) -> dict[str, Any]:
    """A stage in the admin view (docs/http-api.md "Admin routes"): everything, secret runs included
    (docs/security.md)."""
    evaluation = row["result"]
    run = evaluation.get("run")
    meta = None if run is None else {key: value for key, value in run.items() if key != "result"}
    return {
        "start_time": timestamp(row["start_time"]), "end_time": timestamp(row["end_time"]), "mode": row["stage"],
        "secret": row["secret"], "runner": row["gpu"], "score": row["score"], "passed": row["passed"],
        "compilation": evaluation.get("compilation"), "meta": meta, "result": None if run is None else run.get("result"),
        "system": row["system"],
    }


def admin_submission(row, runs) -> dict[str, Any]:
    return {
        "submission_id": row["id"], "leaderboard_id": row["leaderboard_id"],
        "leaderboard_name": row["leaderboard_name"] or "", "file_name": row["file_name"],
        "user_id": str(row["user_id"]), "submission_time": timestamp(row["submitted_at"]), "done": bool(row["done"]),
        "code": row["code"], "runs": [admin_run(r) for r in runs], "job_status": row["job_status"],
        "job_error": row["job_error"], "job_last_heartbeat": timestamp(row["job_last_heartbeat"]),
    }


def stats(totals, by_gpu, by_user, *, last_day: bool) -> dict[str, Any]:
    """Flat statistics (docs/http-api.md "Admin routes"); durations in seconds."""
    found: dict[str, Any] = {"num_submissions": totals["num_submissions"], "sub_waiting": totals["sub_waiting"],
                             "num_users": totals["num_users"]}
    for row in by_gpu:
        gpu = row["gpu"]
        for key in ("num_run", "runs_passed", "runs_scored", "runs_secret"):
            found[f"{key}.{gpu}"] = row[key]
        for key in ("max_delay", "avg_delay", "total_runtime"):
            found[f"{key}.{gpu}"] = round(float(row[key]), 3)
    if last_day:
        for row in by_user:
            found[f"total.{row['user_id']}"] = round(float(row["total"]), 3)
    else:
        found["num_unique_codes"] = totals["num_unique_codes"]
    return found


def board_rankings_entry(row, submission_count: int) -> dict[str, Any]:
    """An entry of GET /leaderboard/{leaderboard_id}/rankings, as kernelboard reads it."""
    return {"user_name": row["user_name"], "score": row["score"], "file_name": row["file_name"],
            "submission_id": row["submission_id"], "submission_count": submission_count,
            "submission_time": timestamp(row["submitted_at"])}


def board_rankings_board(row) -> dict[str, Any]:
    task = row["task"]
    return {"name": row["name"], "deadline": timestamp(row["deadline"]), "lang": task.get("lang", ""),
            "description": row["description"] or "", "reference": task.get("files", {}).get("reference.py", ""),
            "benchmarks": task.get("benchmarks", []), "gpu_types": sorted(row["gpus"])}
