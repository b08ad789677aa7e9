"""Response shapes of http-api.md, built from read-model rows. Pure."""

from __future__ import annotations

from datetime import datetime
from typing import Any

SECRET_HIDDEN_MODES = ("test", "benchmark")


def timestamp(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.isoformat().replace("+00:00", "Z")


def runner_queue(gpu: str, found) -> dict[str, Any]:
    if found is None:
        return {"runner": "unknown", "gpu": gpu, "queued_jobs": None, "running_jobs": None,
                "available_runners": None, "status": "unavailable", "error": "unknown gpu"}
    name, row = found
    return {"runner": row["backend"] or "local", "gpu": name, "queued_jobs": row["queued"],
            "running_jobs": row["running"], "available_runners": None, "status": "available", "error": None}


def leaderboard(row, *, accessible: bool) -> dict[str, Any]:
    task = dict(row["task"]) if accessible else {}
    return {
        "id": row["id"], "name": row["name"], "description": row["description"] or "", "task": task,
        "deadline": timestamp(row["deadline"]), "gpu_types": sorted(row["gpus"]), "visibility": row["visibility"],
        "creator_id": row["creator_id"], "forum_id": row["forum_id"],
    }


def stage_run(row) -> dict[str, Any]:
    evaluation = row["result"]
    run = evaluation.get("run") or {}
    view = {
        "start_time": timestamp(row["start_time"]), "end_time": timestamp(row["end_time"]), "mode": row["stage"],
        "secret": row["secret"], "runner": row["gpu"], "score": row["score"], "passed": row["passed"],
    }
    # Secret runs and ranked stages show no harness output to clients (http-api.md §3.12, harness.md §6).
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
    }


def ranking_entry(row, leaderboard_name: str, gpu: str) -> dict[str, Any]:
    return {
        "submission_id": row["submission_id"], "rank": row["rank"], "submission_name": row["file_name"],
        "submission_time": timestamp(row["submitted_at"]), "submission_score": row["score"],
        "leaderboard_name": leaderboard_name, "user_id": str(row["user_id"]), "user_name": row["user_name"],
        "gpu_type": gpu,
    }


def user_submission(row) -> dict[str, Any]:
    """An element of GET /user/submissions (http-api.md §3.11): ranked results only in `runs`."""
    return {
        "id": row["id"], "leaderboard_name": row["leaderboard_name"] or "", "file_name": row["file_name"],
        "submission_time": timestamp(row["submitted_at"]), "done": bool(row["done"]),
        "runs": [{"gpu_type": run["gpu_type"], "score": run["score"]} for run in row["runs"]],
    }
