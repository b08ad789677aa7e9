"""Public routes and HTTP conventions through real HTTP (docs/http-api.md "Conventions", "Public reads")."""

from __future__ import annotations

from tests.gateway.conftest import CODE, cli, new_user

NOT_FOUND = {"detail": "Not Found"}


def test_gpus_of_a_leaderboard_whatever_the_case_it_is_typed_in(gateway):
    _, cli_id = new_user(gateway)
    http = gateway.http

    assert http.get("/gpus/open").json() == ["null"]
    assert http.get("/gpus/OPEN", headers=cli(cli_id)).json() == ["null"]
    assert (http.get("/gpus/nope").status_code, http.get("/gpus/nope").json()) == (
        404, {"detail": "Leaderboard `nope` does not exist."})
    assert (http.get("/gpus/closed").status_code, http.get("/gpus/closed").json()) == (
        401, {"detail": "Authentication required for closed leaderboard"})
    closed = http.get("/gpus/closed", headers=cli(cli_id))
    assert (closed.status_code, closed.json()) == (403, {"detail": "You do not have access to this leaderboard"})
    invalid = http.get("/gpus/open", headers=cli("not-a-cli-id"))
    assert (invalid.status_code, invalid.json()) == (401, {"detail": "Invalid or unauthorized auth header"})
    assert http.get("/gpus/open", headers=cli("")).json() == ["null"]  # an empty header counts as absent


def test_submission_count_counts_ranked_users_and_a_users_eligible_runs(gateway):
    user_id, cli_id = new_user(gateway)
    before = gateway.http.get("/submission_count/open/null").json()["count"]
    for mode in ("leaderboard", "leaderboard", "test"):
        accepted = gateway.submit(cli_id, "open", "null", mode, CODE).json()
        gateway.wait_done(cli_id, accepted["details"]["id"])

    assert gateway.http.get("/submission_count/open/null").json() == {"count": before + 1}
    assert gateway.http.get("/submission_count/Open/null", params={"user_id": user_id}).json() == {"count": 2}
    assert gateway.http.get("/submission_count/open/null", params={"user_id": "nobody"}).json() == {"count": 0}
    wrong_gpu = gateway.http.get("/submission_count/open/H100")
    assert (wrong_gpu.status_code, wrong_gpu.json()) == (
        400, {"detail": "GPU type 'H100' is not supported for leaderboard 'open'. Supported GPUs: null"})
    assert gateway.http.get("/submission_count/nope/null").status_code == 404
    assert gateway.http.get("/submission_count/closed/null").status_code == 401


def test_runner_queue_counts_a_just_accepted_submission_while_it_waits(gateway):
    _, cli_id = new_user(gateway)
    before = gateway.http.get("/runner_queue/IDLE").json()

    accepted = gateway.submit(cli_id, "idle", "idle", "test", CODE)

    assert accepted.status_code == 202
    assert accepted.json()["runner_queue"]["queued_jobs"] == before["queued_jobs"] + 1
    queue = gateway.http.get("/runner_queue/Idle").json()
    # the spec's keys; position and estimates are extra keys (tests/gateway/test_queue_visibility.py)
    assert {key: queue[key] for key in ("runner", "gpu", "queued_jobs", "running_jobs", "available_runners",
                                        "status", "error")} == {
        "runner": queue["runner"], "gpu": "idle", "queued_jobs": before["queued_jobs"] + 1, "running_jobs": 0,
        "available_runners": None, "status": "available", "error": None}
    assert isinstance(queue["runner"], str)
    assert gateway.http.get("/runner_queue/B300").json() == {
        "runner": "unknown", "gpu": "B300", "queued_jobs": None, "running_jobs": None, "available_runners": None,
        "status": "unavailable", "error": "unknown gpu", "position": None, "estimated_wait_s": None,
        "estimated_start": None}


def test_health_and_leading_slashes(gateway):
    # full URLs: httpx would read a relative "//health" as a host name
    assert gateway.http.get("/health").json() == {"status": "ok"}
    assert gateway.http.get(f"{gateway.url}//health").json() == {"status": "ok"}
    assert gateway.http.get(f"{gateway.url}///leaderboards").json() == gateway.http.get("/leaderboards").json()


def test_unknown_routes_and_methods_answer_the_one_error_shape(gateway):
    _, cli_id = new_user(gateway)
    http = gateway.http
    for response, status, detail in (
        (http.get("/no/such/route/here"), 404, "Not Found"),
        (http.delete("/leaderboards"), 405, "Method Not Allowed"),
        (http.get("/open/null/test"), 405, "Method Not Allowed"),
        (http.get("/user/submissions/abc", headers=cli(cli_id)), 422, None),
        (http.get("/gpus/a%00b"), 400, "Invalid request: the URL contains a NUL character"),
    ):
        assert response.status_code == status, response.text
        assert response.headers["content-type"] == "application/json"
        assert isinstance(response.json()["detail"], str)
        assert detail is None or response.json()["detail"] == detail


def test_reserved_first_segments_never_become_a_streamed_submission(gateway):
    _, cli_id = new_user(gateway)
    for path in ("/admin/submissions/x", "/Admin/x/y", "/user/submissions/5", "/gpus/open/null",
                 "/openapi.json/a/b", "/submission/open/null"):
        response = gateway.http.post(path, headers=cli(cli_id), files={"file": ("k.py", CODE.encode())})
        assert response.status_code in (404, 405), (path, response.status_code, response.text)
        assert response.json() in (NOT_FOUND, {"detail": "Method Not Allowed"})


def test_request_bodies_over_the_gateway_limits_are_refused_before_parsing(gateway):
    _, cli_id = new_user(gateway)
    http = gateway.http
    too_large = {"detail": "Request body too large"}

    big_upload = http.post("/submission/open/null/test", headers=cli(cli_id),
                           files={"file": ("k.py", b"#" * 2_000_001)})
    big_json = http.post("/admin/users", headers={"Authorization": "Bearer nope", "Content-Type": "application/json"},
                         content=b'{"user_id": "' + b"1" * 1_000_000 + b'"}')
    chunked = http.post("/admin/users", headers={"Content-Type": "application/json"},
                        content=(b"x" * 100_000 for _ in range(11)))
    within_gateway_limit = http.post("/submission/open/null/test", headers=cli(cli_id),
                                     files={"file": ("k.py", b"#" * 1_500_000)})

    for response in (big_upload, big_json, chunked):
        assert (response.status_code, response.json()) == (413, too_large)
    assert (within_gateway_limit.status_code, within_gateway_limit.json()) == (
        413, {"detail": "Submission file is too large (limit: 1MB)."})


def test_binary_empty_rude_and_path_traversal_uploads_get_clean_answers_and_nothing_is_recorded(gateway):
    _, cli_id = new_user(gateway)
    http = gateway.http

    def listed() -> list[dict]:
        return http.get("/user/submissions", headers=cli(cli_id)).json()

    refused = {
        "binary": (("k.py", b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe"), 400,
                   "Failed to decode submission file content as UTF-8."),
        "nul": (("k.py", b"print(1)\x00"), 400, "Failed to decode submission file content as UTF-8."),
        "empty": (("k.py", b""), 400, "Empty file submitted. Please provide a file with code."),
        "rude": (("shit.py", CODE.encode()), 400, "Please provide a non-rude filename"),
        "archive": (("k.tar.gz", b"\x1f\x8b"), 400,
                    "Archive submissions are not supported; submit a single .py, .cu, .cuh or .cpp file."),
    }
    for case, (upload, status, detail) in refused.items():
        response = http.post("/submission/open/null/test", headers=cli(cli_id), files={"file": upload})
        assert (response.status_code, response.json()) == (status, {"detail": detail}), case

    # a traversing name is reduced to its base name and stored as that, never as a path
    traversal = http.post("/submission/open/null/test", headers=cli(cli_id),
                          files={"file": ("../../../etc/evil.py", CODE.encode())})
    assert traversal.status_code == 202, traversal.text
    submission_id = traversal.json()["details"]["id"]
    shown = gateway.wait_done(cli_id, submission_id)
    assert shown["file_name"] == "evil.py"
    # only the accepted one was recorded: a refusal leaves no trace in the user's list
    assert [entry["id"] for entry in listed()] == [submission_id]
