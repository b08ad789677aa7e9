"""Every bundled problem through the whole platform (gateway → dispatcher → local runner → scorer → ledger): each
correct solution passes its tests and each wrong one fails them, as a competitor would see it when polling."""

from __future__ import annotations

import pytest
import yaml

from problems import PROBLEMS_ROOT

pytestmark = pytest.mark.slow


def _solutions() -> list[tuple[str, str, str]]:
    """(leaderboard, solution label, code) for every example solution of every bundled problem."""
    plan = []
    for entry in yaml.safe_load((PROBLEMS_ROOT / "examples.yaml").read_text())["problems"]:
        directory = PROBLEMS_ROOT / entry["directory"]
        for path in sorted(directory.glob("solutions/*/*.py")):
            plan.append((entry["name"], f"{path.parent.name}/{path.name}", path.read_text()))
    return plan


def test_every_bundled_problem_passes_its_correct_solutions_and_fails_its_wrong_ones(platform):
    platform.load_bundled_problems()
    cli_id = platform.register("2001", "dana")
    plan = _solutions()
    assert {board for board, _, _ in plan} == {"identity_py", "vectoradd_py", "grayscale_py", "softmax_py",
                                                "matmul_py", "prefixsum_py"}
    assert all(any(label.startswith(kind) for b, label, _ in plan if b == board)
               for board, _, _ in plan for kind in ("correct/", "wrong/"))

    submitted = {}
    for board, label, code in plan:  # all queued at once: the local GPU works through them two at a time
        response = platform.submit(cli_id, board, "cpu", "test", code, label.split("/")[1])
        assert response.status_code == 202, (board, label, response.text)
        submitted[(board, label)] = response.json()["details"]["id"]

    outcomes = {key: platform.wait_done(cli_id, submission_id, timeout=600)
                for key, submission_id in submitted.items()}
    for (board, label), view in outcomes.items():
        [run] = view["runs"]
        if label.startswith("correct/"):
            assert view["job"]["status"] == "succeeded" and run["passed"] is True, (board, label, view)
        else:
            assert view["job"]["status"] == "failed" and run["passed"] is False, (board, label, view)
            assert run["result"]["check"] == "fail", (board, label, run["result"])
