"""Ranking rules on a board served by the null backend, whose every run scores the same."""

from __future__ import annotations

import pytest

from problems import PROBLEMS_ROOT
from tests.support.events import archived
from tests.support.in_process import InProcessPlatform
from tests.support.platform import identity_board

CODE = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_text()


@pytest.fixture
def null_platform(nats_url, database_url, tmp_path):
    running = InProcessPlatform(nats_url, database_url, tmp_path, null_gpus=("null",))
    running.start()
    running.add_boards(identity_board("ties", ["null"]))
    yield running
    running.stop()


def test_equal_scores_share_a_rank_and_each_user_keeps_a_best_entry(null_platform, database_url):
    users = [null_platform.register(str(4000 + i), f"tie{i}") for i in range(3)]
    ids = []
    for cli in (users[0], users[1], users[0], users[2]):
        response = null_platform.submit(cli, "ties", "null", "leaderboard", CODE)
        ids.append(response.json()["details"]["id"])
        null_platform.wait_done(cli, ids[-1])

    ranking = null_platform.ranking("ties", "null")

    assert [r["rank"] for r in ranking] == [1, 1, 1]
    # one entry per user; among equal scores the earliest submission is listed first and kept per user
    assert [r["submission_id"] for r in ranking] == [ids[0], ids[1], ids[3]]
    assert all(isinstance(r["submission_score"], float) for r in ranking)
    changes = archived(database_url, "LeaderboardRankChanged")
    assert [len(c["top"]) for c in changes] == [1, 2, 3]  # user 0's second, equal score changed nothing
    assert changes[-1]["top"][2]["rank"] == 1


def test_unknown_leaderboard_and_gpu_are_refused_with_their_reasons(null_platform):
    cli = null_platform.register("4100", "dana")

    unknown = null_platform.submit(cli, "nope", "null", "test", CODE)
    wrong_gpu = null_platform.submit(cli, "ties", "H100", "test", CODE)
    binary = null_platform.http.post("/submission/ties/null/test", headers={"X-Popcorn-Cli-Id": cli},
                                     files={"file": ("k.py", b"\xff\xfe\x00bad")})
    too_big = null_platform.submit(cli, "ties", "null", "test", "#" * 1_000_001)
    anonymous = null_platform.http.post("/submission/ties/null/test", files={"file": ("k.py", b"x")})

    assert (unknown.status_code, unknown.json()) == (404, {"detail": "Leaderboard `nope` does not exist."})
    assert wrong_gpu.status_code == 400
    assert wrong_gpu.json()["detail"] == ("GPU type 'H100' is not supported for leaderboard 'ties'. "
                                          "Supported GPUs: null")
    assert (binary.status_code, binary.json()["detail"]) == (400, "Failed to decode submission file content as UTF-8.")
    assert (too_big.status_code, too_big.json()["detail"]) == (413, "Submission file is too large (limit: 1MB).")
    assert (anonymous.status_code, anonymous.json()["detail"]) == (
        400, "Missing X-Web-Auth-Id or X-Popcorn-Cli-Id header")
    assert null_platform.http.get("/user/submissions/1", headers={"X-Popcorn-Cli-Id": cli}).status_code == 404


def test_a_submission_near_the_size_limit_travels_the_whole_pipeline(null_platform):
    """A 1 MB file rides inside JSON events and run payloads: every hop must be sized for it."""
    cli = null_platform.register("4200", "frank")
    padding = "# " + "x" * 97 + "\n"
    code = CODE + padding * ((999_000 - len(CODE)) // len(padding))
    assert 990_000 < len(code.encode()) <= 1_000_000

    response = null_platform.submit(cli, "ties", "null", "leaderboard", code)

    assert response.status_code == 202, response.text
    view = null_platform.wait_done(cli, response.json()["details"]["id"])
    assert view["job"]["status"] == "succeeded"
    assert view["code"] == code
