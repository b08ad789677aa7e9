"""A reference-kernels board judged by our harness, the organiser's and the competitors' way: the competition file
asks for `harness: kernelbot`, `kernelbot problems sync` creates the board, and submissions go through gateway →
dispatcher → local runner → scorer → ledger. A legitimate submission ranks; the fake-events exploit, which ranks
under the problem's own stock eval.py (tests/exploits/test_refkernels_harness.py), does not."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from services.cli import main as cli
from tests.support.platform import ADMIN_TOKEN

pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).parents[1] / "fixtures" / "reference_kernels"
PROBLEM = FIXTURE / "problems" / "pmpp_v2" / "vectoradd_py"
FAKE_EVENTS = Path(__file__).parents[1] / "exploits" / "refkernels" / "fake_events.py"


def test_a_synced_reference_kernels_board_under_our_harness_ranks_the_honest_and_refuses_fake_events(platform,
                                                                                                      tmp_path):
    checkout = Path(shutil.copytree(FIXTURE, tmp_path / "reference-kernels"))
    competition = checkout / "problems" / "pmpp_v2.yaml"
    data = yaml.safe_load(competition.read_text())
    data["harness"] = "kernelbot"  # the whole competition is judged by our harness
    # The admission pre-check would hold the exploit as hacked before any harness ran; the organiser only warns on
    # timer patches here, so what refuses the exploit is the harness.
    data["precheck"] = {"timer-patch": "warn"}
    data["problems"] = [{**entry, "gpus": ["cpu"]} for entry in data["problems"] if entry["name"] == "vectoradd_v2"]
    competition.write_text(yaml.safe_dump(data, sort_keys=False))
    done = CliRunner().invoke(cli.app, ["problems", "sync", str(checkout / "problems"), "--problem-set", "pmpp_v2"],
                              env={"KB_ADMIN_TOKEN": ADMIN_TOKEN, "KB_URL": platform.url})
    assert done.exit_code == 0 and "created  vectoradd_v2" in done.stdout, done.stdout + done.stderr
    platform.wait_for(lambda: "vectoradd_v2" in {b["name"] for b in platform.http.get("/leaderboards").json()},
                      "the synced board")
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    platform.wait_for(lambda: platform.http.get("/admin/leaderboards/vectoradd_v2/precheck", headers=admin)
                      .json()["rules"]["timer-patch"]["outcome"] == "warn", "the competition's pre-check outcomes")

    alice, mallory = platform.register("3001", "alice"), platform.register("3002", "mallory")
    honest = platform.submit(alice, "vectoradd_v2", "cpu", "leaderboard",
                             (PROBLEM / "solutions" / "correct" / "add.py").read_text(), "add.py")
    cheat = platform.submit(mallory, "vectoradd_v2", "cpu", "leaderboard", FAKE_EVENTS.read_text(), "fast.py")
    assert honest.status_code == 202 and cheat.status_code == 202, (honest.text, cheat.text)
    honest_view = platform.wait_done(alice, honest.json()["details"]["id"], timeout=600)
    cheat_view = platform.wait_done(mallory, cheat.json()["details"]["id"], timeout=600)

    assert honest_view["job"]["status"] == "succeeded", honest_view
    assert cheat_view["job"]["status"] == "failed", cheat_view
    assert "ranked validation failed on cpu" in cheat_view["job"]["error"]
    public_test = next(r for r in cheat_view["runs"] if r["mode"] == "test" and not r["secret"])
    assert "timer tampering detected" in public_test["result"]["test.0.error"]
    assert [row["user_id"] for row in platform.ranking("vectoradd_v2", "cpu")] == ["3001"]
