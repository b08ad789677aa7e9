"""A user's own submissions: the list, and deleting one (docs/http-api.md "A user's submissions")."""

from __future__ import annotations

import pytest

from tests.gateway.conftest import CODE, cli, new_user
from tests.support.platform import identity_board


def submit_done(platform, cli_id: str, leaderboard: str, mode: str) -> int:
    response = platform.submit(cli_id, leaderboard, "null", mode, CODE, file_name=f"{mode}.py")
    assert response.status_code == 202, response.text
    submission_id = response.json()["details"]["id"]
    platform.wait_done(cli_id, submission_id)
    return submission_id


def test_the_list_is_newest_first_with_ranked_results_only(gateway):
    _, cli_id = new_user(gateway)
    _, stranger = new_user(gateway)
    def listed(**params):
        return gateway.http.get("/user/submissions", headers=cli(cli_id), params=params)
    assert listed().json() == []

    ranked = submit_done(gateway, cli_id, "open", "leaderboard")
    tested = submit_done(gateway, cli_id, "open", "test")
    submit_done(gateway, stranger, "open", "test")

    entries = listed(leaderboard="OPEN", limit=50).json()
    assert [e["id"] for e in entries] == [tested, ranked]
    assert entries[0] == {"id": tested, "leaderboard_name": "open", "file_name": "test.py",
                          "submission_time": entries[0]["submission_time"], "done": True, "runs": []}
    assert entries[0]["submission_time"].endswith("Z")
    [ranked_run] = entries[1]["runs"]
    assert ranked_run == {"gpu_type": "null", "score": pytest.approx(1e-6)}  # the null backend's fixed 1000 ns
    assert isinstance(ranked_run["score"], float)
    assert [e["id"] for e in listed(limit=1).json()] == [tested]
    assert [e["id"] for e in listed(limit=1, offset=1).json()] == [ranked]
    assert listed(offset=5).json() == []
    assert listed(leaderboard="no-such-board").json() == []
    for params, detail in (({"limit": 0}, "limit must be between 1 and 100"),
                           ({"limit": 101}, "limit must be between 1 and 100"),
                           ({"offset": -1}, "offset must be >= 0")):
        response = listed(**params)
        assert (response.status_code, response.json()) == (400, {"detail": detail})
    anonymous = gateway.http.get("/user/submissions")
    assert (anonymous.status_code, anonymous.json()) == (
        400, {"detail": "Missing X-Web-Auth-Id or X-Popcorn-Cli-Id header"})


def test_a_deleted_submission_leaves_the_ranking_the_counts_and_the_users_list(gateway):
    gateway.add_boards(identity_board("deletions", ["null"]))
    _, owner = new_user(gateway)
    _, other = new_user(gateway)
    kept = submit_done(gateway, other, "deletions", "leaderboard")
    deleted = submit_done(gateway, owner, "deletions", "leaderboard")
    assert {e["submission_id"] for e in gateway.ranking("deletions", "null")} == {kept, deleted}

    foreign = gateway.http.delete(f"/user/submissions/{deleted}", headers=cli(other))
    assert (foreign.status_code, foreign.json()) == (403, {"detail": "Not authorized to delete this submission"})
    assert gateway.http.get(f"/user/submissions/{deleted}", headers=cli(owner)).status_code == 200  # the CLI's look

    response = gateway.http.delete(f"/user/submissions/{deleted}", headers=cli(owner))

    assert (response.status_code, response.json()) == (200, {"status": "ok", "submission_id": deleted})
    # read your own write: the gateway answers once the ledger has projected the deletion
    assert [e["submission_id"] for e in gateway.ranking("deletions", "null")] == [kept]
    assert gateway.ranking("deletions", "null")[0]["rank"] == 1
    assert gateway.http.get("/submission_count/deletions/null").json() == {"count": 1}
    assert gateway.http.get("/user/submissions", headers=cli(owner)).json() == []
    for method in ("GET", "DELETE"):
        gone = gateway.http.request(method, f"/user/submissions/{deleted}", headers=cli(owner))
        assert (gone.status_code, gone.json()) == (404, {"detail": "Submission not found"})
    assert gateway.http.delete("/user/submissions/99999999999999999999999", headers=cli(owner)).status_code == 404
