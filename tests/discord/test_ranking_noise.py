"""Rankings that say when two scores are the same: every front end marks an entry whose 95% interval overlaps the
one ranked just above it, by one rule (services/core/rules/noise.py): the API's `tied_within_noise`, `kernelbot
leaderboard show`, Discord's `/leaderboard show` and the web page. The runs of a board on a GPU no backend serves
are reported here, as a remote runner would, so each score's mean and error can be chosen."""

from __future__ import annotations

import asyncio
import math

import pytest
from typer.testing import CliRunner

from problems import PROBLEMS_ROOT
from schemas.contracts import EvalResult, FullResult, RunResult, SystemInfo
from schemas.events import RunCompleted
from services.cli.main import app
from services.kit.bus import publish_all
from tests.discord.wire import Person, option
from tests.support.events import archived
from tests.support.platform import identity_board

BOARD, GPU = "noise_board", "unserved_gpu"
CODE = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_text()
# (user, mean ns, standard error ns): bob's interval overlaps alice's; carol is clear of both
ENTRIES = [("alice", 10_000.0, 100.0), ("bob", 10_150.0, 100.0), ("carol", 20_000.0, 100.0)]


def stage(mean: float, err: float) -> EvalResult:
    result = {"benchmark-count": "1", "benchmark.0.spec": "size: 8", "benchmark.0.mean": str(mean),
              "benchmark.0.err": str(err), "check": "pass", "test-count": "1", "test.0.status": "pass"}
    return EvalResult(start="2026-01-01T00:00:00Z", end="2026-01-01T00:00:00Z",
                      run=RunResult(success=True, passed=True, result=result))


def report(platform, submission_id: int, mean: float, err: float) -> None:
    platform.wait_for(lambda: len(archived(platform.database_url, "RunRequested", str(submission_id))) == 2,
                      "run requests")
    result = FullResult(success=True, system=SystemInfo(gpu=GPU),
                        runs={s: stage(mean, err) for s in ("test", "benchmark", "leaderboard")})
    asyncio.run(publish_all(platform.nats_url, [
        RunCompleted(run_id=run["run_id"], submission_id=submission_id, leaderboard=BOARD, gpu=GPU,
                     mode=run["mode"], secret=run["secret"], ranking_by="geom", backend="remote", result=result,
                     correlation_id=str(submission_id))
        for run in archived(platform.database_url, "RunRequested", str(submission_id))]))


@pytest.fixture(scope="module")
def noisy_board(platform):
    platform.add_boards(identity_board(BOARD, [GPU]))
    for n, (user, mean, err) in enumerate(ENTRIES):
        cli_id = platform.register(str(9800 + n), user)
        submission_id = platform.submit(cli_id, BOARD, GPU, "leaderboard", CODE).json()["details"]["id"]
        report(platform, submission_id, mean, err)
        assert platform.wait_done(cli_id, submission_id)["job"]["status"] == "succeeded"
    return platform


def test_the_api_marks_an_entry_tied_within_noise_with_the_one_above(noisy_board):
    rows = noisy_board.ranking(BOARD, GPU)
    assert [(r["user_name"], r["rank"], r["tied_within_noise"]) for r in rows] == [
        ("alice", 1, False), ("bob", 2, True), ("carol", 3, False)]
    # the board ranks by `geom`: the interval is taken on logarithms, exp(ln m ± 1.96 e/m)
    assert rows[0]["score_interval"] == pytest.approx([1e-5 * math.exp(-0.01959964), 1e-5 * math.exp(0.01959964)])
    # a page starting at bob is told against alice, the entry just above it
    page = noisy_board.http.get(f"/submissions/{BOARD}/{GPU}", params={"offset": 1, "limit": 1}).json()
    assert [(r["user_name"], r["tied_within_noise"]) for r in page] == [("bob", True)]
    third = noisy_board.http.get(f"/submissions/{BOARD}/{GPU}", params={"offset": 2}).json()
    assert [(r["user_name"], r["tied_within_noise"]) for r in third] == [("carol", False)]


def test_kernelbot_leaderboard_show_marks_the_tie(noisy_board):
    shown = CliRunner().invoke(app, ["leaderboard", "show", BOARD, "--gpu", GPU, "--url", noisy_board.url])
    assert shown.exit_code == 0, shown.stdout
    # the board's harness line first (which harness judges it), then the ranking's header and entries
    lines = [line for line in shown.stdout.splitlines() if not line.startswith("harness: ")]
    marked = {line[2:].split()[1]: line.startswith("≈") for line in lines[1:4]}
    assert marked == {"alice": False, "bob": True, "carol": False}, shown.stdout
    assert "[0.000009806, 0.000010198]" in lines[1]
    assert lines[-1] == "≈: tied within noise with the entry above (their 95% intervals overlap)"


async def test_discord_leaderboard_show_marks_the_tie(wire, noisy_board):
    viewer = Person(9899, "viewer")
    token = wire.interact(viewer, "leaderboard", [{"name": "show", "type": 1, "options": [
        option("leaderboard", BOARD), option("gpu", GPU)]}])
    text = await wire.answer(token, BOARD)
    lines = text.splitlines()
    assert lines[1].startswith("🥇 alice") and lines[2].startswith("≈ 🥈 bob") and lines[3].startswith("🥉 carol")
    assert lines[-1] == "-# ≈: tied within noise with the entry above (their 95% intervals overlap)"


def test_the_web_page_marks_the_same_entry(noisy_board):
    page = noisy_board.http.get(f"/web/leaderboards/{BOARD}", params={"gpu": GPU}).text
    rows = page.split('<tr class="entry">')[1:]
    assert ["≈ tie" in row for row in rows] == [False, True, False]
