"""The floor under every score, end to end with the real services: a crafted underflow (one case far ahead of its
siblings), a case below its declared roofline floor and a score below the operator's fraction of the board's best
are held for review, off the board, with the reason; a legitimately fast submission ranks; an admin clears a false
hold through the review path (`POST /admin/submissions/<id>/precheck/clear`) and it ranks. Runs are reported as a
remote runner does, so each case's time can be chosen."""

from __future__ import annotations

import pytest

from problems import PROBLEMS_ROOT
from schemas.contracts import RooflineCase
from tests.operate.conftest import GPU, mean_board, report_runs, run_cli
from tests.support.events import archived
from tests.support.in_process import InProcessPlatform
from tests.support.platform import ADMIN_TOKEN, identity_board

CODE = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_text()
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
HELD_SUFFIX = "; it ranks once an admin clears it"


@pytest.fixture
def floor_platform(nats_url, database_url, tmp_path):
    running = InProcessPlatform(nats_url, database_url, tmp_path, local_gpus={"cpu": 1},
                       extra_env={"KB_FLOOR_BEST_FRACTION": "0.1"})
    running.start()
    yield running
    running.stop()


def submit(platform, database_url, board, gpu, user_id, means_ns) -> tuple[str, int, dict]:
    """A ranked submission whose runs report `means_ns` per case; its finished view."""
    cli = platform.register(user_id, f"user{user_id}")
    submission_id = platform.submit(cli, board, gpu, "leaderboard", CODE).json()["details"]["id"]
    report_runs(platform, database_url, submission_id, means_ns)
    return cli, submission_id, platform.wait_done(cli, submission_id)


def ranked(platform, board, gpu=GPU) -> list[int]:
    return [row["submission_id"] for row in platform.ranking(board, gpu)]


def test_an_underflow_is_held_a_fast_one_ranks_and_an_admin_clears_a_false_hold(floor_platform, database_url):
    platform = floor_platform
    platform.add_boards(mean_board("floor_geo"))
    _, honest, _ = submit(platform, database_url, "floor_geo", GPU, "81", [1_000.0, 4_000.0, 16_000.0])
    # one shape made 100 times faster while the others stay as the best entry's: the #159 pattern
    bob, underflow, view = submit(platform, database_url, "floor_geo", GPU, "82", [1_000.0, 4_000.0, 160.0])
    _, fast, _ = submit(platform, database_url, "floor_geo", GPU, "83", [400.0, 1_500.0, 7_000.0])

    reason = ("benchmark 2 (160 ns) on remote is over 20 times faster than against the board's median on its other "
              "cases; one case far ahead of its siblings collapses the aggregate")
    assert view["job"]["status"] == "succeeded"  # its runs passed: the score waits for review, nothing failed
    assert view["job"]["error"] == f"held for review: {reason}{HELD_SUFFIX}"
    [held] = archived(database_url, "ScoreHeld", str(underflow))
    assert (held["rule"], held["reason"], held["gpu"]) == ("sibling", reason, GPU)
    assert archived(database_url, "ScoreComputed", str(underflow)) == []
    platform.wait_for(lambda: ranked(platform, "floor_geo") == [fast, honest], "the legitimate fast one ranked")

    admin_view = platform.http.get(f"/admin/submissions/{underflow}", headers=ADMIN).json()["submission"]
    assert admin_view["floor_holds"] == [{"gpu": GPU, "rule": "sibling", "reason": reason,
                                          "score": held["score"], "cleared": False}]
    assert admin_view["precheck"] is None  # the pre-check never fired: the floor held it

    cleared = platform.http.post(f"/admin/submissions/{underflow}/precheck/clear", headers=ADMIN,
                                 json={"reason": "the small shape has a special path"})
    assert cleared.status_code == 200, cleared.text
    assert cleared.json()["floor_holds"][0]["cleared"] is True
    platform.wait_for(lambda: ranked(platform, "floor_geo") == [underflow, fast, honest], "the cleared one ranked")
    [revised] = [e for e in archived(database_url, "ScoreRevised") if e["submission_id"] == underflow]
    assert (revised["previous_score"], revised["score"]) == (None, held["score"])
    again = platform.http.post(f"/admin/submissions/{underflow}/precheck/clear", headers=ADMIN)
    assert again.status_code == 409 and "already cleared" in again.json()["detail"]
    assert platform.http.post(f"/admin/submissions/{honest}/precheck/clear", headers=ADMIN).status_code == 404
    assert platform.submission(bob, underflow)["job"]["status"] == "succeeded"

    # The cleared entry is now the board's best, and skewed. A legitimate entry is measured against the board's
    # per-case median (1000, 4000, 7000 ns), not against it (where its first case would look over 20 times ahead of its others): it
    # ranks. A crafted underflow is still held.
    _, legitimate, view = submit(platform, database_url, "floor_geo", GPU, "84", [800.0, 3_000.0, 12_000.0])
    assert view["job"]["error"] is None, view["job"]
    _, second_underflow, view = submit(platform, database_url, "floor_geo", GPU, "85", [1_000.0, 4_000.0, 100.0])
    assert view["job"]["error"].startswith("held for review: benchmark 2 (100 ns)"), view["job"]
    platform.wait_for(lambda: ranked(platform, "floor_geo") == [underflow, fast, legitimate, honest],
                      "the legitimate one ranked beside the skewed best, the second underflow held")


def test_a_declared_roofline_and_the_operators_fraction_of_the_best_hold_scores(floor_platform, database_url):
    platform = floor_platform
    board = identity_board("floor_roof", ["H100"])
    # 335 MB per case: 100 µs on an H100's 3.35 TB/s
    roofline = [RooflineCase(bytes=335_000_000), RooflineCase(bytes=335_000_000)]
    platform.add_boards(board.model_copy(update={"task": board.task.model_copy(update={"roofline": roofline})}),
                        mean_board("floor_frac"))

    _, below, view = submit(platform, database_url, "floor_roof", "H100", "91", [150_000.0, 50_000.0])
    _, above, _ = submit(platform, database_url, "floor_roof", "H100", "92", [150_000.0, 120_000.0])
    assert view["job"]["error"] == ("held for review: benchmark 1 took 50 µs on H100, below its roofline floor of "
                                    f"100 µs{HELD_SUFFIX}")
    [accepted] = archived(database_url, "SubmissionAccepted", str(below))
    assert [run["floor_ns"] for run in accepted["runs"]] == [[100_000.0, 100_000.0], []]  # public run; secret gates
    platform.wait_for(lambda: ranked(platform, "floor_roof", "H100") == [above], "the honest one ranked")

    _, best, _ = submit(platform, database_url, "floor_frac", GPU, "93", [10_000.0])
    _, tenfold, view = submit(platform, database_url, "floor_frac", GPU, "94", [900.0])
    assert view["job"]["error"] == ("held for review: score 900 ns on remote is below 0.1 of the board's best, "
                                    f"10 µs{HELD_SUFFIX}")
    [held] = archived(database_url, "ScoreHeld", str(tenfold))
    assert held["rule"] == "best-fraction"
    platform.wait_for(lambda: ranked(platform, "floor_frac") == [best], "only the best ranked")

    # the operator's command clears it too, and waits until its score stands
    cleared = run_cli(platform, "precheck", "clear", str(tenfold), "--reason", "a new algorithm")
    assert cleared.stdout.splitlines() == [
        f"Cleared the hold of submission {tenfold}",
        f"Submission {tenfold} is now succeeded; its board is rescored (`kernelbot events tail --type ScoreRevised`)."]
    assert ranked(platform, "floor_frac") == [tenfold, best]
