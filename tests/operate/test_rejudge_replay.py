"""Rejudging a board after its ranking rule changed, and rebuilding the read model from the log: end to end through
the `kernelbot` command against the running platform."""

from __future__ import annotations

import asyncio
import json
import time

import pyarrow.parquet as pq
import pytest

from problems import PROBLEMS_ROOT
from schemas.events import LeaderboardUpdated
from services.kit.bus import publish_all
from services.ledger.repository import TABLES as LEDGER_TABLES
from services.operate.replay import SCORER_TABLES
from services.operate.stream import connected, stream_bounds
from tests.operate.conftest import GPU, mean_board, ranked_users, report_runs, run_cli, wait_rows
from tests.support.events import archived, query
from tests.support.in_process import InProcessPlatform

CODE = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_text()
# Under `mean` bob's even timings win; under `geom` alice's one fast case wins.
ALICE_NS, BOB_NS = [1_000.0, 100_000.0], [20_000.0, 30_000.0]
# When the ledger applied each event / last touched a job: the time of projection, not a fact of the log.
TIME_OF_PROJECTION = ("recorded_at", "updated_at")


@pytest.fixture
def remote_platform(nats_url, database_url, tmp_path):
    """The operate tier's platform with the scorer's sibling floor off: alice's one case a hundred times faster than
    her other is the shape that rule holds for review (services/scorer/floor.py), and bob, measured against her, would
    be held too. The rule has its own tests (tests/operate/test_floor_holds.py); these are about ranking rules."""
    running = InProcessPlatform(nats_url, database_url, tmp_path, local_gpus={"cpu": 1},
                       extra_env={"KB_FLOOR_SIBLING_RATIO": "0"})
    running.start()
    yield running
    running.stop()


def dump(database_url: str) -> dict[str, list[str]]:
    tables = [*LEDGER_TABLES, "event_archive", *SCORER_TABLES]
    dropped = "".join(f" - '{column}'" for column in TIME_OF_PROJECTION)
    return {table: [r["row"] for r in query(database_url, f"SELECT (to_jsonb(t){dropped})::text AS row FROM {table} t "
                                                         "ORDER BY 1")]
            for table in tables}


def wait_projected(platform, database_url: str) -> None:
    """Until the ledger has applied the whole stream: a dump taken earlier could still change under the test."""

    async def last_seq() -> int:
        async with connected(platform.nats_url) as client:
            return (await stream_bounds(client))[1]

    def caught_up() -> bool:
        archived_max = query(database_url, "SELECT COALESCE(max(stream_seq), 0) AS n FROM event_archive")[0]["n"]
        return archived_max == asyncio.run(last_seq())

    platform.wait_for(caught_up, "the ledger to catch up with the stream")
    time.sleep(0.5)  # and the scorer to finish what the last events asked of it


def assert_same(live: dict[str, list[str]], rebuilt: dict[str, list[str]]) -> None:
    differing = {table: (sorted(set(live[table]) - set(rebuilt[table])), sorted(set(rebuilt[table]) - set(live[table])))
                 for table in live if live[table] != rebuilt[table]}
    assert not differing, "\n".join(f"{table}:\n  live only: {a}\n  rebuilt only: {b}"
                                     for table, (a, b) in differing.items())


def ranked_scenario(platform, database_url) -> dict[str, int]:
    platform.add_boards(mean_board("rules"))
    ids = {}
    for user_id, name, means in (("61", "alice", ALICE_NS), ("62", "bob", BOB_NS)):
        cli = platform.register(user_id, name)
        ids[name] = platform.submit(cli, "rules", GPU, "leaderboard", CODE).json()["details"]["id"]
        report_runs(platform, database_url, ids[name], means)
        assert platform.wait_done(cli, ids[name])["job"]["status"] == "succeeded"
    return ids


def change_rule(platform, database_url, ranking_by: str) -> None:
    board = mean_board("rules")
    task = board.task.model_copy(update={"ranking_by": ranking_by})
    asyncio.run(publish_all(platform.nats_url, [LeaderboardUpdated(
        name="rules", task=task, task_hash=f"rule-{ranking_by}", deadline=board.deadline)]))
    wait_rows(database_url, "SELECT ranking_by FROM leaderboards WHERE name = 'rules'", [{"ranking_by": ranking_by}])


def test_rescore_after_a_rule_change_moves_the_board_and_a_replay_rebuilds_it_row_for_row(
        remote_platform, database_url, tmp_path):
    ids = ranked_scenario(remote_platform, database_url)
    assert ranked_users(remote_platform, "rules") == ["bob", "alice"]
    change_rule(remote_platform, database_url, "geom")

    preview = run_cli(remote_platform, "rejudge", "--leaderboard", "rules", "--rescore", "--dry-run")

    assert "by `geom`" in preview.stdout
    assert "alice" in preview.stdout and "#2 (0.000050500 s) -> #1 (0.000010000 s)" in preview.stdout
    assert ranked_users(remote_platform, "rules") == ["bob", "alice"]  # a dry run changes nothing
    assert archived(database_url, "RejudgeRequested") == []

    done = run_cli(remote_platform, "rejudge", "--leaderboard", "rules", "--rescore", "--reason", "rule fix",
                   process=True)

    assert "2 scores revised" in done.stdout
    assert ranked_users(remote_platform, "rules") == ["alice", "bob"]
    [request] = archived(database_url, "RejudgeRequested")
    assert (request["ranking_by"], request["reason"], request["action"]) == ("geom", "rule fix", "rescore")
    revised = {r["submission_id"]: r for r in archived(database_url, "ScoreRevised")}
    assert revised[ids["alice"]]["previous_score"] == 50.5e-6
    assert abs(revised[ids["alice"]]["score"] - 10e-6) < 1e-12
    assert {r["harness_version"] for r in revised.values()} == {"h-1"}
    # the audit trail: who held the top before and after, caused by this rejudge
    change = archived(database_url, "LeaderboardRankChanged", request["rejudge_id"])
    assert [e["user_name"] for e in change[0]["top"]] == ["alice", "bob"]
    assert [e["user_name"] for e in change[0]["previous_top"]] == ["bob", "alice"]

    wait_projected(remote_platform, database_url)
    live = dump(database_url)
    assert live["scores"] and live["scorer_best"] and live["rank_changes"]
    assert live["standings"] and live["standing_versions"]  # compared row for row below, as every table
    run_cli(remote_platform, "events", "replay", "all", "--source", "archive")
    assert_same(live, dump(database_url))
    run_cli(remote_platform, "events", "replay", "ledger", "--source", "stream")
    assert_same(live, dump(database_url))
    assert ranked_users(remote_platform, "rules") == ["alice", "bob"]
    refused = run_cli(remote_platform, "events", "replay", "dispatcher", check=False)
    assert refused.returncode == 1 and "would launch every run again" in refused.stderr

    # the open data set: public scores, ranks, code; the secret runs nowhere
    out = tmp_path / "rules.jsonl"
    run_cli(remote_platform, "export", "--leaderboard", "rules", "--format", "jsonl", "--output", str(out))
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["user_name"], r["rank"]) for r in rows] == [("alice", 1), ("bob", 2)]
    assert all(r["run_id"].endswith(".public") and r["code"] == CODE for r in rows)
    parquet = tmp_path / "rules.parquet"
    run_cli(remote_platform, "export", "--leaderboard", "rules", "--format", "parquet", "--output", str(parquet))
    table = pq.read_table(parquet).to_pylist()
    assert [(r["user_name"], r["rank"], r["score"]) for r in table] == [
        (r["user_name"], r["rank"], r["score"]) for r in rows]

    # a closed leaderboard stays out of the open data unless the operator asks for it
    closing = remote_platform.http.post("/admin/leaderboards/rules/visibility", json={"visibility": "closed"},
                                        headers={"Authorization": f"Bearer {remote_platform.admin_token}"})
    assert closing.status_code == 200, closing.text
    remote_platform.wait_for(lambda: query(database_url, "SELECT 1 FROM leaderboards WHERE name = 'rules' "
                                                         "AND visibility = 'closed'"), "the board to close")
    refused = run_cli(remote_platform, "export", "--leaderboard", "rules", "--format", "jsonl", "--output",
                      str(tmp_path / "closed.jsonl"), check=False)
    assert refused.returncode != 0 and "is closed; pass --include-closed" in refused.stderr
    assert not (tmp_path / "closed.jsonl").exists()
    run_cli(remote_platform, "export", "--leaderboard", "rules", "--format", "jsonl", "--output",
            str(tmp_path / "closed.jsonl"), "--include-closed")
    assert (tmp_path / "closed.jsonl").read_text() == out.read_text()


def test_a_rerun_runs_ranked_submissions_again_and_revises_their_scores(remote_platform, database_url):
    ids = ranked_scenario(remote_platform, database_url)
    assert ranked_users(remote_platform, "rules") == ["bob", "alice"]

    preview = run_cli(remote_platform, "rejudge", "--leaderboard", "rules", "--rerun", "--dry-run")
    assert "Would run 2 ranked submissions" in preview.stdout
    run_cli(remote_platform, "rejudge", "--leaderboard", "rules", "--rerun", "--reason", "harness fix")
    remote_platform.wait_for(lambda: archived(database_url, "RejudgeRequested"), "the request to be recorded")
    [request] = archived(database_url, "RejudgeRequested")
    remote_platform.wait_for(lambda: len(archived(database_url, "RerunPlanned")) == 2, "reruns to be planned")
    # the fixed harness finds alice's kernel slower, bob's faster
    report_runs(remote_platform, database_url, ids["alice"], [90_000.0, 90_000.0], suffix=request["rejudge_id"])
    report_runs(remote_platform, database_url, ids["bob"], [10_000.0, 10_000.0], suffix=request["rejudge_id"])
    remote_platform.wait_for(lambda: len(archived(database_url, "ScoreRevised")) == 2, "revised scores", 60)

    revised = {r["submission_id"]: r for r in archived(database_url, "ScoreRevised")}
    assert revised[ids["bob"]]["score"] == 10e-6 and revised[ids["bob"]]["previous_score"] == 25e-6
    assert revised[ids["alice"]]["run_id"] == f"{ids['alice']}.{GPU}.public.{request['rejudge_id']}"
    remote_platform.wait_for(lambda: [r["submission_score"] for r in remote_platform.ranking("rules", GPU)] == [
        10e-6, 90e-6], "the board to show the rerun")
    wait_projected(remote_platform, database_url)
    live = dump(database_url)
    run_cli(remote_platform, "events", "replay", "scorer")
    assert_same(live, dump(database_url))
