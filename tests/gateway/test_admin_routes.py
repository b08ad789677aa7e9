"""Admin routes over submissions and the platform (docs/http-api.md "Admin routes") through real HTTP."""

from __future__ import annotations

from tests.gateway.admission import admin, fresh_board
from tests.gateway.conftest import CODE, cli, new_user
from tests.support.events import query


def test_the_admin_view_shows_every_run_with_full_records_and_numbers_for_scores(gateway):
    user_id, cli_id = new_user(gateway)
    submission_id = gateway.submit(cli_id, "open", "null", "leaderboard", CODE).json()["details"]["id"]
    gateway.wait_done(cli_id, submission_id)

    view = admin(gateway, "GET", f"/admin/submissions/{submission_id}").json()

    assert view["status"] == "ok"
    shown = view["submission"]
    assert {k: shown[k] for k in ("submission_id", "leaderboard_name", "file_name", "user_id", "done", "code",
                                  "job_status", "job_error")} == {
        "submission_id": submission_id, "leaderboard_name": "open", "file_name": "submission.py",
        "user_id": user_id, "done": True, "code": CODE, "job_status": "succeeded", "job_error": None}
    assert isinstance(shown["leaderboard_id"], int) and shown["submission_time"].endswith("Z")
    secret = [run for run in shown["runs"] if run["secret"]]
    public = [run for run in shown["runs"] if not run["secret"]]
    assert secret and public
    for run in shown["runs"]:
        assert set(run) == {"start_time", "end_time", "mode", "secret", "runner", "score", "passed", "compilation",
                            "meta", "result", "system"}
        assert isinstance(run["meta"], dict) and isinstance(run["result"], dict) and isinstance(run["system"], dict)
    # passed leaderboard stages carry their score as a number, the secret one too
    # (docs/http-api.md "Deliberate differences from upstream KernelBot", row 8)
    scores = [run["score"] for run in shown["runs"] if run["mode"] == "leaderboard"]
    assert len(scores) == 2 and all(isinstance(score, float) for score in scores)
    assert [run["score"] for run in shown["runs"] if run["mode"] != "leaderboard"] == [None] * 4
    # the secret run's output is the admin's to see (docs/security.md), never a user's
    assert all(run["result"] for run in secret)
    user_view = gateway.submission(cli_id, submission_id)
    assert all("result" not in run for run in user_view["runs"] if run["secret"])
    missing = admin(gateway, "GET", "/admin/submissions/999999999")
    assert (missing.status_code, missing.json()) == (404, {"detail": "Submission not found"})


def test_admin_deletions_one_and_by_user_name(gateway):
    user_id, cli_id = new_user(gateway)
    board = fresh_board(gateway, "purge")
    ids = [gateway.submit(cli_id, board, "null", "test", CODE).json()["details"]["id"] for _ in range(3)]
    for submission_id in ids:
        gateway.wait_done(cli_id, submission_id)

    deleted = admin(gateway, "DELETE", f"/admin/submissions/{ids[0]}")
    assert deleted.json() == {"status": "ok", "submission_id": ids[0]}
    assert gateway.http.get(f"/user/submissions/{ids[0]}", headers=cli(cli_id)).status_code == 404
    again = admin(gateway, "DELETE", f"/admin/submissions/{ids[0]}")
    assert (again.status_code, again.json()) == (404, {"detail": "Submission not found"})

    [board_id] = [b["id"] for b in gateway.http.get("/leaderboards").json() if b["name"] == board]
    purged = admin(gateway, "DELETE", "/admin/submissions",
                   params={"leaderboard_id": board_id, "user_name": f"user{user_id}"})
    assert purged.json() == {"status": "ok", "leaderboard_id": board_id, "user_name": f"user{user_id}",
                             "deleted_job_status": 2, "deleted_runs": 2, "deleted_submissions": 2}
    assert gateway.http.get("/user/submissions", headers=cli(cli_id)).json() == []
    assert query(gateway.database_url, "SELECT count(*) AS n FROM submissions WHERE id = ANY($1) AND NOT deleted",
                 ids)[0]["n"] == 0
    unknown = admin(gateway, "DELETE", "/admin/submissions", params={"leaderboard_id": 999999, "user_name": "x"})
    assert (unknown.status_code, unknown.json()) == (404, {"detail": "Leaderboard `999999` does not exist."})
    for params in ({"leaderboard_id": board_id}, {"user_name": "x"}, {"leaderboard_id": "x", "user_name": "x"}):
        malformed = admin(gateway, "DELETE", "/admin/submissions", params=params)
        assert malformed.status_code == 422 and isinstance(malformed.json()["detail"], str)


def test_a_leaderboards_submission_ids_newest_first(gateway):
    _, cli_id = new_user(gateway)
    board = fresh_board(gateway, "listing")
    ids = [gateway.submit(cli_id, board, "null", "test", CODE).json()["details"]["id"] for _ in range(3)]

    listed = admin(gateway, "GET", f"/admin/leaderboards/{board.upper()}/submissions").json()
    assert listed == {"status": "ok", "leaderboard": board, "limit": 100, "offset": 0,
                      "submission_ids": sorted(ids, reverse=True)}
    page = admin(gateway, "GET", f"/admin/leaderboards/{board}/submissions", params={"limit": 1, "offset": 1})
    assert page.json()["submission_ids"] == [sorted(ids)[1]]
    for params, detail in (({"limit": 0}, "limit must be between 1 and 1000"),
                           ({"limit": 1001}, "limit must be between 1 and 1000"),
                           ({"offset": -1}, "offset must be >= 0")):
        bad = admin(gateway, "GET", f"/admin/leaderboards/{board}/submissions", params=params)
        assert (bad.status_code, bad.json()) == (400, {"detail": detail})
    assert admin(gateway, "GET", "/admin/leaderboards/nope/submissions").status_code == 404


def test_stats_all_time_and_last_day(gateway):
    user_id, cli_id = new_user(gateway)
    board = fresh_board(gateway, "stats")
    for mode in ("test", "leaderboard"):
        gateway.wait_done(cli_id, gateway.submit(cli_id, board, "null", mode, CODE).json()["details"]["id"])

    all_time = admin(gateway, "GET", "/admin/stats", params={"leaderboard_name": board.upper()}).json()
    assert all_time["status"] == "ok"
    stats = all_time["stats"]
    assert {k: stats[k] for k in ("num_submissions", "sub_waiting", "num_users", "num_unique_codes",
                                  "num_run.null", "runs_secret.null", "runs_passed.null")} == {
        "num_submissions": 2, "sub_waiting": 0, "num_users": 1, "num_unique_codes": 1, "num_run.null": 3,
        "runs_secret.null": 1, "runs_passed.null": 3}
    for key in ("max_delay.null", "avg_delay.null", "total_runtime.null"):
        assert isinstance(stats[key], float) and stats[key] >= 0
    last_day = admin(gateway, "GET", "/admin/stats", params={"last_day_only": "true", "leaderboard_name": board})
    assert "num_unique_codes" not in last_day.json()["stats"]
    assert [key for key in last_day.json()["stats"] if key.startswith("total.")] == [f"total.{user_id}"]
    assert admin(gateway, "GET", "/admin/stats").json()["stats"]["num_submissions"] >= 2
    unknown = admin(gateway, "GET", "/admin/stats", params={"leaderboard_name": "nope"})
    assert (unknown.status_code, unknown.json()) == (404, {"detail": "Leaderboard `nope` does not exist."})


def test_export_validates_then_answers_that_no_export_is_configured(gateway):
    [open_id] = [b["id"] for b in gateway.http.get("/leaderboards").json() if b["name"] == "open"]
    for body, status, detail in (
        ({"leaderboard_ids": [], "filename": "x.parquet"}, 400, "leaderboard_ids must be a non-empty list of integers"),
        ({"leaderboard_ids": ["1"], "filename": "x.parquet"}, 400,
         "leaderboard_ids must be a non-empty list of integers"),
        ({"leaderboard_ids": [open_id], "filename": "x.csv"}, 400, "filename must end with .parquet"),
        ({"leaderboard_ids": [open_id], "filename": "x.parquet", "private": False}, 400,
         "Cannot export active leaderboards to the public dataset: open"),
        ({"leaderboard_ids": [open_id], "filename": "x.parquet"}, 503, "Hugging Face export is not configured"),
    ):
        response = admin(gateway, "POST", "/admin/export-hf", json=body)
        assert (response.status_code, response.json()) == (status, {"detail": detail}), body


def test_registering_a_user_needs_both_fields_and_a_free_cli_id(gateway):
    for body in ({"user_name": "ada"}, {"user_id": "u-missing"}, {}, {"user_id": "", "user_name": "ada"}):
        response = admin(gateway, "POST", "/admin/users", json=body)
        assert (response.status_code, response.json()) == (400, {"detail": "user_id and user_name are required"})

    first = admin(gateway, "POST", "/admin/users", json={"user_id": "owner-1", "user_name": "ada", "cli_id": "taken"})
    assert first.json() == {"status": "ok", "user_id": "owner-1", "user_name": "ada", "cli_id": "taken"}
    gateway.wait_for(lambda: gateway.http.get("/user/submissions", headers=cli("taken")).status_code == 200,
                     "the first registration")
    clash = admin(gateway, "POST", "/admin/users", json={"user_id": "owner-2", "user_name": "bob", "cli_id": "taken"})
    assert (clash.status_code, clash.json()) == (400, {"detail": "cli_id already in use"})
    # the owner may register again with the same id (an upsert), and gets a fresh id when none is given
    again = admin(gateway, "POST", "/admin/users", json={"user_id": "owner-1", "user_name": "ada2", "cli_id": "taken"})
    assert again.status_code == 200
    generated = admin(gateway, "POST", "/admin/users", json={"user_id": "owner-3", "user_name": "cy"}).json()
    assert len(generated["cli_id"]) >= 20
