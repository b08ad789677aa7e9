"""The open-data export to the Hugging Face Hub, through each path that reaches it: the gateway's
`POST /admin/export-hf`, the gateway's schedule, and `/admin export-hf` on Discord. All three upload with
huggingface_hub to a fake of the Hub's endpoints (tests/support/fakes/hf_hub.py); the gateway finds it through
HF_ENDPOINT, as huggingface_hub does.
"""

from __future__ import annotations

import asyncio
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pyarrow.parquet as pq
import pytest

from problems import PROBLEMS_ROOT
from runner.task.taskfile import load_problem
from schemas.events import LeaderboardCreated
from services.gateway.hf_schedule import FILENAME, ExportSchedule
from services.gateway.settings import GatewaySettings
from tests.discord.wire import Person, option, start_bot
from tests.support.fakes.hf_hub import TOKEN
from tests.support.platform import identity_board

IDENTITY = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_text()
OTHER = IDENTITY + "\n# the same kernel, other code\n"


def admin_post(platform, body: dict):
    return platform.http.post("/admin/export-hf", json=body,
                              headers={"Authorization": f"Bearer {platform.admin_token}"})


def board_id(platform, name: str) -> int:
    return next(b["id"] for b in platform.http.get("/leaderboards").json() if b["name"] == name)


def parquet_rows(data: bytes) -> list[dict]:
    return pq.read_table(io.BytesIO(data)).to_pylist()


DATASET_COLUMNS = json.loads((Path(__file__).parents[1] / "fixtures" / "kernelbot_data_columns.json").read_text())


def parquet_columns(data: bytes) -> list[dict]:
    schema = pq.read_schema(io.BytesIO(data))
    return [{"name": f.name, "type": str(f.type)} for f in schema]


def ranked(platform, cli_id: str, board: str, code: str, mode: str = "leaderboard") -> int:
    """A submission (ranked unless told) through the admin route, which takes boards past their deadline."""
    response = platform.http.post(f"/admin/submission/{board}/null/{mode}",
                                  files={"file": ("submission.py", code.encode())},
                                  headers={"Authorization": f"Bearer {platform.admin_token}",
                                           "X-Popcorn-Cli-Id": cli_id})
    assert response.status_code == 202, response.text
    submission_id = response.json()["details"]["id"]
    platform.wait_done(cli_id, submission_id)
    return submission_id


def ended_board(name: str) -> LeaderboardCreated:
    problem = load_problem(PROBLEMS_ROOT / "examples" / "identity_py")
    return LeaderboardCreated(name=name, task=problem.task, task_hash=problem.task_hash, gpus=["null"],
                              deadline=datetime.now(UTC) - timedelta(minutes=1), secret_seed=7)


def test_the_gateway_exports_the_data_sets_columns_and_rows_failed_ones_included(platform, hf_hub):
    platform.add_boards(ended_board("ended_board"))
    ada, bob = platform.register("9601", "ada"), platform.register("9602", "bob")
    first = ranked(platform, ada, "ended_board", IDENTITY)
    ranked(platform, ada, "ended_board", IDENTITY)  # the same code again: one row, its best kept
    other = ranked(platform, ada, "ended_board", OTHER)
    bobs = ranked(platform, bob, "ended_board", IDENTITY)
    unranked = ranked(platform, bob, "ended_board", OTHER, mode="test")  # never ranks: a row with no score
    ids = [board_id(platform, "ended_board")]

    done = admin_post(platform, {"leaderboard_ids": ids, "filename": "boards/ended_board.parquet"})
    assert done.status_code == 200, done.text
    assert done.json() == {"status": "ok", "rows": 4, "repo_id": "kernelbot/open-data",
                           "filename": "boards/ended_board.parquet"}
    data = hf_hub.datasets["kernelbot/open-data"]["boards/ended_board.parquet"]
    assert parquet_columns(data) == DATASET_COLUMNS["columns"]
    rows = {r["submission_id"]: r for r in parquet_rows(data)}
    # equal scores (the null backend's): the earlier submission is the best of its code
    assert sorted(rows) == sorted([first, other, bobs, unranked])
    assert {r["user_name"] for r in rows.values()} == {"ada", "bob"}
    assert {r["problem_name"] for r in rows.values()} == {"ended_board"} and {r["leaderboard_id"] for r in
                                                                              rows.values()} == set(ids)
    assert rows[first]["code_id"] == rows[bobs]["code_id"] != rows[other]["code_id"]  # the same code, one id
    assert (rows[first]["mode"], rows[first]["runner"], rows[first]["passed"], rows[first]["status"]) == (
        "leaderboard", "null", True, "succeeded")
    assert rows[first]["score"] is not None and rows[first]["code"] == IDENTITY
    assert rows[first]["user_id"] == "9601" and rows[first]["file_name"] == "submission.py"
    assert (rows[unranked]["score"], rows[unranked]["mode"], rows[unranked]["runner"], rows[unranked]["passed"]) \
        == (None, None, None, None)

    only_ranked = admin_post(platform, {"leaderboard_ids": ids, "filename": "ranked.parquet", "ranked_only": True})
    assert only_ranked.status_code == 200 and only_ranked.json()["rows"] == 3, only_ranked.text
    kept = parquet_rows(hf_hub.datasets["kernelbot/open-data"]["ranked.parquet"])
    assert sorted(r["submission_id"] for r in kept) == sorted([first, other, bobs])
    refused = admin_post(platform, {"leaderboard_ids": ids, "filename": "x.parquet", "ranked_only": "yes"})
    assert (refused.status_code, refused.json()) == (400, {"detail": "ranked_only must be true or false"})

    public = admin_post(platform, {"leaderboard_ids": ids, "filename": "ended_board.parquet", "private": False})
    assert public.status_code == 200, public.text
    assert public.json()["repo_id"] == "kernelbot/open-data-public"
    assert len(parquet_rows(hf_hub.datasets["kernelbot/open-data-public"]["ended_board.parquet"])) == 4

    active, closed = board_id(platform, "fast_board"), board_id(platform, "closed_board")
    for body, status, detail in (
        ({"leaderboard_ids": [active], "filename": "x.parquet", "private": False}, 400,
         "Cannot export active leaderboards to the public dataset: fast_board"),
        ({"leaderboard_ids": [closed], "filename": "x.parquet", "private": False}, 400,
         "Cannot export active leaderboards to the public dataset: closed_board"),
        ({"leaderboard_ids": [999999], "filename": "x.parquet"}, 400, "Leaderboards not found: 999999"),
        ({"leaderboard_ids": ids, "filename": "../x.parquet"}, 400, "filename must end with .parquet"),
    ):
        response = admin_post(platform, body)
        assert (response.status_code, response.json()) == (status, {"detail": detail}), body


@pytest.mark.slow
async def test_the_schedule_exports_the_running_competitions_under_upstreams_name(platform, hf_hub):
    conn = await asyncpg.connect(platform.database_url)
    try:  # checked every 10 s; the first check with a competition to export exports, and records it once uploaded
        for _ in range(400):
            recorded = await conn.fetch("SELECT repo_id, filename, rows, error FROM hf_exports")
            if recorded:
                break
            await asyncio.sleep(0.1)
    finally:
        await conn.close()
    assert FILENAME == "active_submissions.parquet"
    assert [(r["repo_id"], r["filename"], r["error"]) for r in recorded] == [("kernelbot/open-data", FILENAME, None)]
    data = hf_hub.datasets["kernelbot/open-data"][FILENAME]
    assert parquet_columns(data) == DATASET_COLUMNS["columns"]
    assert recorded[0]["rows"] == len(parquet_rows(data))

    # with submissions on the competition and on its -dev board, a replica whose interval has passed exports only
    # the running competition: not its -dev board, not the practice boards (deadline 2100), not ended ones
    # deadline 2100: practice, not a competition (added from a thread: add_boards runs its own event loop)
    await asyncio.to_thread(platform.add_boards, identity_board("practice_board", ["null"]))
    cli = platform.register("9604", "cyd")
    in_competition = ranked(platform, cli, "sprint_comp", IDENTITY)
    ranked(platform, cli, "sprint_comp-dev", IDENTITY)
    ranked(platform, cli, "practice_board", IDENTITY)
    due = GatewaySettings(database_url=platform.database_url, hf_token=TOKEN, hf_endpoint=hf_hub.url,
                          hf_private_dataset="kernelbot/open-data", hf_export_every_h=1e-9)
    async with asyncpg.create_pool(platform.database_url, min_size=1, max_size=3) as pool:
        assert await ExportSchedule(pool, due).tick() is True
    rows = parquet_rows(hf_hub.datasets["kernelbot/open-data"][FILENAME])
    assert {r["problem_name"] for r in rows} == {"sprint_comp"}
    assert in_competition in {r["submission_id"] for r in rows}

    # another replica's schedule: the interval has not passed, so it does not export again
    settings = GatewaySettings(database_url=platform.database_url, hf_token=TOKEN, hf_endpoint=hf_hub.url,
                               hf_private_dataset="kernelbot/open-data", hf_export_every_h=1)
    pool = await asyncpg.create_pool(platform.database_url, min_size=1, max_size=3)
    try:
        commits = len(hf_hub.commits)
        assert await ExportSchedule(pool, settings).tick() is False
        assert len(hf_hub.commits) == commits
    finally:
        await pool.close()


async def test_admin_export_hf_on_discord(fake_discord, platform, hf_hub):
    configured = {"hf_token": TOKEN, "hf_endpoint": hf_hub.url, "hf_private_dataset": "kernelbot/open-data"}
    wire = await start_bot(fake_discord, platform.nats_url, platform.database_url, **configured)
    admin = Person(9603, "organiser", roles=(int(fake_discord.role_named("Leaderboard Admin")["id"]),))

    def export(*options: dict) -> str:
        return wire.interact(admin, "admin", [{"name": "export-hf", "type": 1, "options": list(options)}])

    try:
        answer = await wire.answer(export(option("leaderboards", "identity_py, fast_board"),
                                          option("filename", "discord/two.parquet")), ("✅", "❌"))
        assert answer.startswith("✅ Exported ") and "to `kernelbot/open-data` as `discord/two.parquet`" in answer
        rows = parquet_rows(hf_hub.datasets["kernelbot/open-data"]["discord/two.parquet"])
        assert int(answer.split()[2]) == len(rows)
        assert {r["problem_name"] for r in rows} <= {"identity_py", "fast_board"}
        assert "nope" in await wire.answer(export(option("leaderboards", "nope"), option("filename", "x.parquet")))
        public = await wire.answer(export(option("leaderboards", "fast_board"), option("filename", "x.parquet"),
                                          option("private", False, 5)), "❌")
        assert public == "❌ Cannot export active leaderboards to the public dataset: fast_board"
    finally:
        await wire.client.close()

    # a bot whose data set the Hub does not have: the Hub's refusal, in a sentence
    missing = await start_bot(fake_discord, platform.nats_url, platform.database_url,
                              **(configured | {"hf_private_dataset": "kernelbot/missing"}))
    try:
        token = missing.interact(admin, "admin", [{"name": "export-hf", "type": 1, "options": [
            option("leaderboards", "fast_board"), option("filename", "x.parquet")]}])
        failed = await missing.answer(token, "❌")
        assert failed.startswith("❌ Export failed: ") and "404" in failed, failed
    finally:
        await missing.client.close()

    unconfigured = await start_bot(fake_discord, platform.nats_url, platform.database_url)
    try:
        token = unconfigured.interact(admin, "admin", [{"name": "export-hf", "type": 1, "options": [
            option("leaderboards", "fast_board"), option("filename", "x.parquet")]}])
        assert await unconfigured.answer(token, "❌") == "❌ Hugging Face export is not configured"
    finally:
        await unconfigured.client.close()
