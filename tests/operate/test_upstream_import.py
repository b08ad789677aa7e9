"""`kernelbot import-upstream`: an upstream deployment's database, read only, becomes this platform's history."""

from __future__ import annotations

import asyncio

import pytest

from problems import PROBLEMS_ROOT
from schemas.credentials import cli_id_hash
from schemas.events import FIRST_PRACTICE_BOARD_ID
from services.cli.bundled import leaderboards_from_competition
from services.operate.upstream_import import import_upstream
from tests.operate.conftest import run_cli
from tests.support.events import archived, query
from tests.support.platform import Platform, identity_board
from tests.support.upstream_db import BOARD_IDS, CLI_IDS, SUBMISSIONS, WEB_IDS, upstream_ranking

pytestmark = pytest.mark.slow

BOARDS = {"matmul": ["A100", "H100"], "sorting-closed": ["B200"], "old-cuda": ["T4"]}
PRACTICE = {board.name for board in leaderboards_from_competition(PROBLEMS_ROOT / "examples.yaml", set())}
BOARD_ROWS = "SELECT id, name, practice FROM leaderboards ORDER BY id"


class Interrupted(Exception):
    pass


def interrupted_import(platform: Platform, upstream_url: str, after: int) -> None:
    """An import stopped (as by Ctrl-C) once `after` steps of its progress have passed."""
    def start(total: int):
        done = [0]

        def advance(steps: int) -> None:
            done[0] += steps
            if done[0] >= after:
                raise Interrupted

        return advance

    with pytest.raises(Interrupted):
        asyncio.run(import_upstream(upstream_url, platform.nats_url, platform.database_url, start))


def ours(platform: Platform, board: str, gpu: str, cli_id: str) -> list[dict]:
    response = platform.http.get(f"/submissions/{board}/{gpu}", headers={"X-Popcorn-Cli-Id": cli_id})
    assert response.status_code == 200, response.text
    # equal scores share a rank; upstream lists them in no set order, so both sides are compared sorted
    return sorted(({"user_id": e["user_id"], "user_name": e["user_name"], "score": e["submission_score"],
                    "rank": e["rank"]} for e in response.json()), key=lambda e: (e["rank"], e["user_id"]))


def test_an_upstream_deployment_is_imported_with_its_rankings_resumably_and_once(
        nats_url, database_url, upstream_url, tmp_path):
    platform = Platform(nats_url, database_url, tmp_path, null_gpus=("null",))
    platform.start()
    try:
        # what `kernelbot up` made first (its practice boards), and a board of the platform's own: id 1, which
        # upstream's boards leave free
        platform.load_bundled_problems()
        platform.add_boards(identity_board("own-board", ["null"]))
        interrupted_import(platform, upstream_url, after=14)  # boards, users and part of the submissions
        report_path = tmp_path / "report.txt"
        resumed = run_cli(platform, "import-upstream", upstream_url, "--report", str(report_path))
        again = run_cli(platform, "import-upstream", upstream_url, "--report", str(tmp_path / "again.txt"))
        platform.wait_for(lambda: len(archived(database_url, "SubmissionFinished")) == len(SUBMISSIONS),
                          "every imported submission to be projected")

        assert "already there" in resumed.stdout and "Published 0 events" in again.stdout
        # one copy of each fact: the interrupted run and the resumed one together published each event once, and
        # no service added one (nothing was admitted, run or judged again)
        [counts] = query(database_url, "SELECT count(*) AS n, count(DISTINCT event_id) AS d, "
                                       "count(*) FILTER (WHERE event_id NOT LIKE 'upstream:%') AS native "
                                       "FROM event_archive")
        assert counts["n"] == counts["d"] and counts["native"] == len(PRACTICE) + 1  # the boards made before

        for board, gpus in BOARDS.items():
            for gpu in gpus:
                expected = sorted(upstream_ranking(upstream_url, board, gpu), key=lambda e: (e["rank"], e["user_id"]))
                platform.wait_for(lambda b=board, g=gpu, e=expected: ours(platform, b, g, CLI_IDS["alice"]) == e,
                                  f"the ranking of {board} on {gpu}")
        assert [(e["user_name"], e["rank"]) for e in ours(platform, "matmul", "A100", CLI_IDS["alice"])] == [
            ("alice", 1), ("bob", 1), ("carol", 3)]  # the hacked and the secret-failed submissions left out

        # the scorer's own best table holds the imported history, so the next podium is measured against it
        best = query(database_url, "SELECT leaderboard, gpu, user_id, score FROM scorer_best ORDER BY 1, 2, 4, 3")
        assert {(r["leaderboard"], r["gpu"], r["user_id"]) for r in best} == {
            (board, gpu, row["user_id"]) for board, gpus in BOARDS.items() for gpu in gpus
            for row in upstream_ranking(upstream_url, board, gpu)}

        boards = {r["name"]: r for r in query(database_url, "SELECT id, name, gpus, visibility, secret_seed, forum_id, "
                                                            "deadline, templates, created_at, practice "
                                                            "FROM leaderboards")}
        assert set(boards) == {*BOARDS, *PRACTICE, "own-board"}  # the deleted board stays deleted
        # upstream's ids kept; the practice boards in their own range, out of the way; the platform's own kept too
        assert {name: boards[name]["id"] for name in BOARDS} == {name: BOARD_IDS[name] for name in BOARDS}
        assert all(boards[name]["id"] >= FIRST_PRACTICE_BOARD_ID and boards[name]["practice"] for name in PRACTICE)
        assert (boards["own-board"]["id"], boards["own-board"]["practice"]) == (1, False)
        assert not any(boards[name]["practice"] for name in BOARDS)
        assert boards["sorting-closed"]["visibility"] == "closed" and boards["matmul"]["secret_seed"] == 4242
        assert boards["matmul"]["gpus"] == ["A100", "H100"] and boards["old-cuda"]["forum_id"] == 557
        assert boards["matmul"]["created_at"].year == 2026  # dated by its first submission: history, not news

        users = {r["user_id"]: r for r in query(database_url, "SELECT * FROM users")}
        assert users["1001"]["cli_id_sha256"] == cli_id_hash(CLI_IDS["alice"])
        assert users["1001"]["web_auth_id_sha256"] == cli_id_hash(WEB_IDS["alice"])
        assert users["1001"]["provider"] == "discord" and users["gh-2002"]["provider"] == "github"
        assert users["1005"]["cli_id_sha256"] is None and users["1005"]["banned"] and users["1006"]["banned"]
        assert "1003" not in users and "1004" not in users  # no CLI id, or one never validated upstream
        stored = " ".join(str(v) for r in query(database_url, "SELECT payload::text FROM event_archive")
                          for v in r.values())
        assert not any(secret in stored for secret in (*CLI_IDS.values(), *WEB_IDS.values()))
        web = platform.http.get("/user/submissions", headers={"X-Web-Auth-Id": WEB_IDS["alice"]})
        assert web.status_code == 200 and '"id":107' in web.text.replace(" ", ""), web.text

        statuses = {r["id"]: (r["status"], r["code"]) for r in query(database_url,
                                                                     "SELECT id, status, code FROM submissions")}
        hacked = {sid for sid, (status, _) in statuses.items() if status == "hacked"}
        assert hacked == {100 + 6 * 7, 100 + 7 * 7, 100 + 16 * 7}
        assert not hacked & {score["submission_id"] for score in archived(database_url, "ScoreComputed")}
        assert statuses[100 + 8 * 7][0] == "failed" and statuses[100 + 10 * 7][0] == "failed"
        assert statuses[100 + 14 * 7][1] == "print('\ufffd\ufffd')"
        limits = query(database_url, "SELECT mode_category, max_submissions_per_hour FROM rate_limits ORDER BY 1")
        assert [(r["mode_category"], r["max_submissions_per_hour"]) for r in limits] == [("leaderboard", 0),
                                                                                         ("test", 10)]
        invites = {r["code"]: r["user_id"] for r in query(database_url, "SELECT code, user_id FROM invites")}
        assert invites == {"CLOSED-ALICE": "1001", "CLOSED-OPEN": None, "BOTH-BOB": "gh-2002"}
        closed = platform.http.get("/submissions/sorting-closed/B200", headers={"X-Popcorn-Cli-Id": CLI_IDS["eve"]})
        assert closed.status_code in (403, 404)  # closed boards stay closed to those without an invite

        next_id = query(database_url, "SELECT nextval('submission_ids') AS n")[0]["n"]
        assert next_id > 100 + len(SUBMISSIONS) * 7

        # a rebuild of the read model gives every board the id it had, and the next board one above them all
        before = query(database_url, BOARD_ROWS)
        run_cli(platform, "events", "replay", "ledger", "--source", "archive")
        assert query(database_url, BOARD_ROWS) == before
        platform.add_boards(identity_board("after-import", ["null"]))
        [after] = query(database_url, "SELECT id FROM leaderboards WHERE name = 'after-import'")
        assert after["id"] == max(BOARD_IDS[name] for name in BOARDS) + 1

        report = report_path.read_text()
        for expected_line in ("GONE-ONLY: covers no board", "user 1007: banned upstream but has neither",
                              "user 1004: CLI id not valid", "submission 170: unfinished upstream",
                              "submission 198: code is not UTF-8", "1 editor drafts", "1 stored code files"):
            assert expected_line in report, report
    finally:
        platform.stop()


def test_an_import_refuses_a_platform_that_already_has_a_board_of_that_name(
        nats_url, database_url, upstream_url, tmp_path):
    platform = Platform(nats_url, database_url, tmp_path, null_gpus=("null",))
    platform.start()
    try:
        platform.add_boards(identity_board("matmul", ["null"]))
        refused = run_cli(platform, "import-upstream", upstream_url, check=False)
        assert refused.returncode == 1 and "already has leaderboards named matmul" in refused.stderr
        assert query(database_url, "SELECT count(*) AS n FROM event_archive WHERE event_id LIKE 'upstream:%'"
                     )[0]["n"] == 0
    finally:
        platform.stop()


def test_an_import_refuses_a_platform_whose_own_board_has_an_id_upstream_gave_a_board(
        nats_url, database_url, upstream_url, tmp_path):
    platform = Platform(nats_url, database_url, tmp_path, null_gpus=("null",))
    platform.start()
    try:
        platform.load_bundled_problems()  # practice boards: never in the way
        platform.add_boards(*(identity_board(name, ["null"]) for name in ("first", "second", "third")))
        ids = {r["name"]: r["id"] for r in query(database_url, "SELECT id, name FROM leaderboards")}
        assert ids["third"] == BOARD_IDS["matmul"] == 3
        refused = run_cli(platform, "import-upstream", upstream_url, check=False)
        assert refused.returncode == 1, refused.stdout
        assert "leaderboards with upstream's ids: 3 is 'third' here, 'matmul' upstream" in refused.stderr
        assert "named" not in refused.stderr  # nothing else collides: the practice boards' ids are out of the way
        assert query(database_url, "SELECT count(*) AS n FROM event_archive WHERE event_id LIKE 'upstream:%'"
                     )[0]["n"] == 0
    finally:
        platform.stop()
