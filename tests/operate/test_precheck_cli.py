"""`kernelbot precheck` against the running platform: a competition's outcomes set from the command line, a hacked
submission cleared from it, reinstated and rescored onto the board. Runs are reported as a remote runner does."""

from __future__ import annotations

from problems import PROBLEMS_ROOT
from tests.operate.conftest import GPU, mean_board, ranked_users, report_runs, run_cli
from tests.support.events import archived

CODE = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_text()
FLAGGED = CODE + "\n\nimport inspect\n\nHERE = inspect.currentframe()\n"


def test_outcomes_and_clearing_from_the_command_line(remote_platform, database_url):
    platform = remote_platform
    platform.add_boards(mean_board("pc_cli"))
    shown = run_cli(platform, "precheck", "rules", "-l", "pc_cli")
    assert "harness-reach  high    hacked" in shown.stdout and "thread         medium  refuse" in shown.stdout
    bad = run_cli(platform, "precheck", "rules", "-l", "pc_cli", "--set", "harness-reach=ban", check=False)
    assert bad.returncode != 0 and "unknown outcome 'ban'" in bad.stdout + bad.stderr
    run_cli(platform, "precheck", "rules", "-l", "pc_cli", "--set", "thread=off", "--set", "dynamic-code=hacked")
    platform.wait_for(lambda: "thread         medium  off" in run_cli(platform, "precheck", "rules", "-l", "pc_cli")
                      .stdout, "the outcomes projected")

    dan = platform.register("81", "dan")
    submission_id = platform.submit(dan, "pc_cli", GPU, "leaderboard", FLAGGED).json()["details"]["id"]
    report_runs(platform, database_url, submission_id, [5_000.0])
    view = platform.wait_done(dan, submission_id)
    assert view["job"]["status"] == "hacked" and "Matched rules: harness-reach." in view["job"]["error"]
    assert ranked_users(platform, "pc_cli") == []
    [accepted] = archived(database_url, "SubmissionAccepted", str(submission_id))
    assert accepted["precheck"]["outcome"] == "hacked"
    assert accepted["precheck"]["findings"][0]["rule"] == "harness-reach"

    cleared = run_cli(platform, "precheck", "clear", str(submission_id), "--reason", "a frame, never walked")
    assert f"Submission {submission_id} is now succeeded" in cleared.stdout
    platform.wait_for(lambda: ranked_users(platform, "pc_cli") == ["dan"], "dan on the board")
    [revised] = [e for e in archived(database_url, "ScoreRevised") if e["submission_id"] == submission_id]
    assert revised["previous_score"] is None and revised["score"] == 5e-6
    [request] = [e for e in archived(database_url, "RejudgeRequested") if "precheck-clear" in e["rejudge_id"]
                 and e["leaderboard"] == "pc_cli"]
    assert request["action"] == "rescore" and "a frame, never walked" in request["reason"]
    again = run_cli(platform, "precheck", "clear", str(submission_id), check=False)
    assert again.returncode != 0 and "already cleared" in again.stdout + again.stderr
