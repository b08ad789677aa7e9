"""A real submission through gateway → NATS → dispatcher → runner → scorer → ledger → ranking."""

from __future__ import annotations

import pytest

from problems import PROBLEMS_ROOT
from tests.support.platform import identity_board

VECTORADD = PROBLEMS_ROOT / "examples" / "vectoradd_py"


def test_ranked_submission_reaches_the_ranking(platform):
    platform.load_bundled_problems()
    alice = platform.register("1001", "alice")
    code = (VECTORADD / "submission.py").read_text()

    accepted = platform.submit(alice, "VectorAdd_py", "cpu", "leaderboard", code, "add.py")

    assert accepted.status_code == 202, accepted.text
    body = accepted.json()
    submission_id = body["details"]["id"]
    assert isinstance(submission_id, int)
    # readable at once, as popcorn-cli polls immediately after the 202
    assert platform.submission(alice, submission_id)["id"] == submission_id
    view = platform.wait_done(alice, submission_id)
    assert view["job"] == {"status": "succeeded", "error": None, "last_heartbeat": view["job"]["last_heartbeat"]}
    stages = {(run["mode"], run["secret"]) for run in view["runs"]}
    assert stages == {(s, secret) for s in ("test", "benchmark", "leaderboard") for secret in (False, True)}
    public_score = next(r["score"] for r in view["runs"] if r["mode"] == "leaderboard" and not r["secret"])
    assert isinstance(public_score, float) and public_score > 0
    assert all("result" not in r for r in view["runs"] if r["secret"])

    ranking = platform.ranking("vectoradd_py", "cpu")
    assert [(r["rank"], r["user_id"], r["submission_id"]) for r in ranking] == [(1, "1001", submission_id)]
    assert ranking[0]["submission_score"] == public_score
    assert ranking[0]["submission_name"] == "add.py"


def test_wrong_submission_fails_its_tests_and_is_never_ranked(platform):
    platform.load_bundled_problems()
    bob = platform.register("1002", "bob")
    code = (VECTORADD / "solutions" / "wrong" / "subtract.py").read_text()

    submission_id = platform.submit(bob, "vectoradd_py", "cpu", "leaderboard", code).json()["details"]["id"]
    view = platform.wait_done(bob, submission_id)

    assert view["job"]["status"] == "failed"
    assert "ranked validation failed on cpu" in view["job"]["error"]
    assert "will not appear on the leaderboard" in view["job"]["error"]
    public_test = next(r for r in view["runs"] if r["mode"] == "test" and not r["secret"])
    assert public_test["passed"] is False
    # the chain stops after the failed test stage
    assert not any(r["mode"] == "leaderboard" for r in view["runs"])
    assert platform.ranking("vectoradd_py", "cpu") == []


def test_test_mode_reports_results(platform):
    platform.load_bundled_problems()
    carol = platform.register("1003", "carol")
    code = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_text()

    submission_id = platform.submit(carol, "identity_py", "cpu", "test", code).json()["details"]["id"]
    view = platform.wait_done(carol, submission_id)

    assert view["job"]["status"] == "succeeded", view
    [run] = view["runs"]
    assert run["mode"] == "test" and run["passed"] is True
    assert run["result"]["check"] == "pass"
    assert platform.ranking("identity_py", "cpu") == []


@pytest.mark.slow
def test_a_submission_that_outruns_its_stage_timeout_ends_timed_out_for_the_polling_client(platform):
    board = identity_board("slow_identity", ["cpu"])
    platform.add_boards(board.model_copy(update={"task": board.task.model_copy(update={"test_timeout": 4})}))
    dave = platform.register("1004", "dave")
    code = "import time\n\n\ndef custom_kernel(data):\n    time.sleep(600)\n    return data\n"

    accepted = platform.submit(dave, "slow_identity", "cpu", "test", code)
    assert accepted.status_code == 202, accepted.text
    submission_id = accepted.json()["details"]["id"]
    view = platform.wait_done(dave, submission_id, timeout=90)

    # what popcorn-cli reads: a terminal status it reports, done true, and a one-line reason
    assert (view["done"], view["job"]["status"]) == (True, "timed_out"), view
    error = view["job"]["error"]
    assert error and "\n" not in error and len(error) <= 500 and "cpu" in error, error
    assert view["job"]["last_heartbeat"] is not None
    assert "timed out" in error or "timeout" in error, error
