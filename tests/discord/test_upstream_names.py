"""Upstream KernelBot's command names, and what upstream's users get from the leaderboard commands: rankings in
pages with a choice of GPU, autocomplete, multi-GPU submits, forum posts that follow their board."""

from __future__ import annotations

import asyncio
import json
import time

import asyncpg

from problems import PROBLEMS_ROOT
from schemas.events import LeaderboardUpdated
from services.core.readmodel import board_reads
from services.kit.bus import publish_all
from tests.discord.wire import Person, eventually, option
from tests.support.platform import identity_board

ADMIN_ROLE, CREATOR_ROLE = "Leaderboard Admin", "Leaderboard Creator"
IDENTITY = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_text()


def role(wire, name: str) -> int:
    return int(wire.fake.role_named(name)["id"])


def admin_command(wire, person: Person, name: str, *options: dict, **extra) -> str:
    return wire.interact(person, "admin", [{"name": name, "type": 1, "options": list(options)}], **extra)


async def board_shown(wire, name: str) -> dict:
    for _ in range(400):  # a board is an event: wait until the ledger shows it
        row = await board_reads.leaderboard(wire.client.ctx.pool, name)
        if row is not None:
            return row
        await asyncio.sleep(0.05)
    raise AssertionError(f"{name} never reached the read model")


async def test_upstream_admin_names_answer(wire):
    admin = Person(9101, "organiser", roles=(role(wire, ADMIN_ROLE),))
    names = {o["name"] for o in next(c for c in wire.fake.commands if c["name"] == "admin")["options"]}
    assert {"create-local", "create-dev-leaderboard", "show-stats", "stats", "export-hf", "verify-task",
            "set-forum-ids", "get-user-names", "update-user-names"} <= names

    created = admin_command(wire, admin, "create-local", option("directory", "examples/softmax_py"),
                            option("gpu", "cpu"))
    assert await wire.answer(created) == "✅ Created `softmax_py-dev`."
    row = await board_shown(wire, "softmax_py-dev")
    assert row["gpus"] == ["cpu"] and int(row["creator_id"]) == admin.user_id
    # the gateway's figures (GET /admin/stats), as upstream's show-stats lists its own
    stats = await wire.answer(admin_command(wire, admin, "show-stats"))
    assert stats.startswith("```\nnum_submissions = ") and "num_users = " in stats and "num_unique_codes" in stats
    last_day = await wire.answer(admin_command(wire, admin, "show-stats", option("last_day_only", True, 5)))
    assert "num_submissions = " in last_day and "num_unique_codes" not in last_day

    nobody = Person(9102, "nobody")
    assert "needs the Leaderboard Admin role" in await wire.answer(admin_command(wire, nobody, "show-stats"))
    assert "needs the Leaderboard Admin role" in await wire.answer(
        admin_command(wire, nobody, "create-local", option("directory", "examples/softmax_py")))


async def test_a_boards_forum_post_follows_it_and_its_creator_may_delete_it(wire, platform):
    creator_id = 9103
    as_admin = Person(creator_id, "maker", roles=(role(wire, ADMIN_ROLE),))
    as_creator = Person(creator_id, "maker", roles=(role(wire, CREATOR_ROLE),))
    other_creator = Person(9104, "someone", roles=(role(wire, CREATOR_ROLE),))
    forum = int(wire.layout.forum_channel)

    await wire.answer(admin_command(wire, as_admin, "create-local", option("directory", "examples/grayscale_py"),
                                    option("gpu", "cpu")), "Created")
    await eventually(lambda: any(t["name"] == "grayscale_py-dev" for t in wire.fake.threads_of(forum)), 30,
                     lambda: "the forum post")
    [thread] = [t for t in wire.fake.threads_of(forum) if t["name"] == "grayscale_py-dev"]
    starter = wire.fake.messages[int(thread["id"])]
    assert "GPUs: cpu" in starter["content"]

    # the board changes: its post shows the new description and deadline
    row = await board_shown(wire, "grayscale_py-dev")
    await publish_all(platform.nats_url, [LeaderboardUpdated(
        name="grayscale_py-dev", description="Now with **bold** rules.", task=row["task"],
        task_hash=row["task_hash"], templates=row["templates"] or {}, deadline=row["deadline"])])
    await eventually(lambda: starter["content"].startswith("Now with **bold** rules."), 30,
                     lambda: f"the updated post; last: {starter['content']!r}")
    assert "GPUs: cpu" in starter["content"]

    def delete(person: Person) -> str:
        return admin_command(wire, person, "delete-leaderboard", option("leaderboard", "grayscale_py-dev"),
                             option("confirm_name", "grayscale_py-dev"))

    assert "only the leaderboards they created" in await wire.answer(delete(other_creator))
    assert "needs the Leaderboard Admin or the Leaderboard Creator role" in await wire.answer(
        delete(Person(creator_id, "maker")))  # the creator without the role
    assert await wire.answer(delete(as_creator)) == "✅ Deleted `grayscale_py-dev`."
    await eventually(lambda: thread["thread_metadata"]["archived"], 30, lambda: "the archived post")
    assert thread["name"].startswith("grayscale_py-dev - archived at ")


async def stored_post(database_url: str, board: str) -> int | None:
    conn = await asyncpg.connect(database_url)
    try:
        return await conn.fetchval("SELECT thread_id FROM discord_forum_threads WHERE leaderboard = $1", board)
    finally:
        await conn.close()


async def test_set_forum_ids_finds_posts_made_before_their_ids_were_kept(wire, platform):
    admin = Person(9105, "organiser", roles=(role(wire, ADMIN_ROLE),))
    await publish_all(platform.nats_url, [identity_board("posted_board", ["cpu"])])
    forum = int(wire.layout.forum_channel)
    await eventually(lambda: any(t["name"] == "posted_board" for t in wire.fake.threads_of(forum)), 30,
                     lambda: "the forum post")
    [thread] = [t for t in wire.fake.threads_of(forum) if t["name"] == "posted_board"]
    # The bot keeps the post's id just after making it. Waiting without failing let a slow bot store it after the
    # deletion below, so that set-forum-ids found nothing to record ("0 leaderboards: none").
    deadline = time.monotonic() + 30
    while await stored_post(platform.database_url, "posted_board") is None:
        assert time.monotonic() < deadline, "the bot never kept the id of the forum post it made"
        await asyncio.sleep(0.05)
    # as a bot from before this table existed left it: the post is there, its id is not, and it was archived
    conn = await asyncpg.connect(platform.database_url)
    try:
        await conn.execute("DELETE FROM discord_forum_threads WHERE leaderboard = 'posted_board'")
    finally:
        await conn.close()
    thread["thread_metadata"]["archived"] = True

    answer = await wire.answer(admin_command(wire, admin, "set-forum-ids"))
    assert answer.startswith("✅ Recorded the forum posts of ") and "posted_board" in answer, answer
    assert await stored_post(platform.database_url, "posted_board") == int(thread["id"])


async def test_get_user_names_is_a_json_file_of_known_users(wire, platform):
    admin = Person(9106, "organiser", roles=(role(wire, ADMIN_ROLE),))
    await asyncio.to_thread(platform.register, "9107", "ursula")
    token = admin_command(wire, admin, "get-user-names")
    await wire.answer(token, "user")
    [(name, content)] = wire.fake.original(token)["files"]
    assert name == "user_names.json"
    assert json.loads(content)["9107"] == "ursula"


async def ranked_users(platform, board: str, gpu: str, count: int, first_id: int) -> None:
    def run() -> None:
        for n in range(count):
            cli_id = platform.register(str(first_id + n), f"racer{n:02d}")
            response = platform.submit(cli_id, board, gpu, "leaderboard", IDENTITY)
            assert response.status_code == 202, response.text
            platform.wait_done(cli_id, response.json()["details"]["id"])

    await asyncio.to_thread(run)


async def test_show_pages_through_the_ranking_of_the_chosen_gpu(wire, platform):
    await ranked_users(platform, "fast_pair", "null", 12, 9200)
    viewer = Person(9199, "viewer")

    def show(*options: dict) -> str:
        return wire.interact(viewer, "leaderboard", [{"name": "show", "type": 1, "options": list(options)}])

    token = show(option("leaderboard", "fast_pair"), option("gpu", "null"))
    first = await wire.answer(token, "fast_pair")
    assert first.startswith("**fast_pair** · __null__ (1/2)") and first.count(" · `submission.py`") == 10, first
    buttons = wire.fake.original(token)["components"][0]["components"]
    forward = next(b["custom_id"] for b in buttons if b["label"] == "▶")
    await wire.click(viewer, token, forward, 2)
    await wire.answer(token, "(2/2)")
    second = wire.fake.original(token)["content"]
    # equal scores tie (all first), and ties are listed in the order they were submitted
    assert second.count(" · `submission.py`") == 2 and "racer10" in second and "racer11" in second, second
    assert "racer10" not in first and "racer09" in first

    every = await wire.answer(show(option("leaderboard", "fast_pair")), "fast_pair")
    assert every.startswith("**fast_pair** · __null__ (1/2)")  # then null's second page, then null2's
    wrong = await wire.answer(show(option("leaderboard", "fast_pair"), option("gpu", "cpu")))
    assert wrong == "❌ `fast_pair` does not run on cpu; it runs on null, null2."


async def test_autocomplete_offers_boards_and_their_gpus(wire):
    viewer = Person(9300, "viewer")

    def complete(options: list[dict]) -> list[str]:
        token = wire.interact(viewer, "leaderboard", options, kind=4)
        return token

    board_token = complete([{"name": "show", "type": 1, "options": [
        {"name": "leaderboard", "type": 3, "value": "fast", "focused": True}]}])
    gpu_token = complete([{"name": "show", "type": 1, "options": [
        option("leaderboard", "fast_pair"), {"name": "gpu", "type": 3, "value": "nu", "focused": True}]}])
    submit_token = complete([{"name": "submit", "type": 2, "options": [{"name": "ranked", "type": 1, "options": [
        option("leaderboard", "fast_pair"), {"name": "gpu", "type": 3, "value": "null,", "focused": True}]}]}])
    closed_token = complete([{"name": "show", "type": 1, "options": [
        option("leaderboard", "closed_board"), {"name": "gpu", "type": 3, "value": "", "focused": True}]}])

    def choices(token: str) -> list[str] | None:
        body = wire.fake.interaction_responses.get(token)
        return [c["value"] for c in body["data"]["choices"]] if body else None

    await eventually(lambda: all(choices(t) is not None for t in (board_token, gpu_token, submit_token,
                                                                 closed_token)), 20, lambda: "the choices")
    assert all(wire.fake.interaction_responses[t]["type"] == 8 for t in (board_token, gpu_token))
    assert {"fast_board", "fast_pair"} <= set(choices(board_token)) and "identity_py" not in choices(board_token)
    assert choices(gpu_token) == ["null", "null2"]
    assert choices(submit_token) == ["null,null", "null,null2"]
    assert choices(closed_token) == []  # a closed board's GPUs are not shown on Discord


async def test_a_submit_on_several_gpus_runs_on_each(wire, platform):
    dora = Person(9400, "dora")
    attachment = wire.fake.add_attachment("id.py", IDENTITY.encode())
    token = wire.interact(dora, "leaderboard", [{"name": "submit", "type": 2, "options": [
        {"name": "test", "type": 1, "options": [option("script", attachment["id"], 11),
                                                option("leaderboard", "fast_pair"),
                                                option("gpu", "null, null2")]}]}], attachments=[attachment])
    final = await wire.answer(token, ("finished.", "failed"), timeout=60)
    assert "test run of `fast_pair` on null, null2" in final
    assert "**null on null ✅ success**" in final and "**null2 on null ✅ success**" in final, final
    assert final.endswith("finished.")


async def test_update_user_names_renames_users_on_every_view(wire, platform):
    admin = Person(9501, "organiser", roles=(role(wire, ADMIN_ROLE),))
    await ranked_users(platform, "fast_board", "null", 1, 9502)  # racer00, ranked on fast_board
    names = {"9502": "Racer Zero", "no-such-user": "ghost"}
    attachment = wire.fake.add_attachment("names.json", json.dumps(names).encode())
    token = admin_command(wire, admin, "update-user-names", option("attachment", attachment["id"], 11),
                          attachments=[attachment])
    assert await wire.answer(token) == "✅ Renamed 1 users. Unknown user ids left alone: no-such-user"

    def shown() -> set[str]:
        return {r["user_name"] for r in platform.ranking("fast_board", "null")}

    await eventually(lambda: "Racer Zero" in shown(), 30, lambda: f"the new name; shown: {shown()}")
    assert "racer00" not in shown()
    bad = wire.fake.add_attachment("names.json", b"[1, 2]")
    refused = admin_command(wire, admin, "update-user-names", option("attachment", bad["id"], 11),
                            attachments=[bad])
    assert (await wire.answer(refused)).startswith("❌ Attach a JSON object mapping user ids to names")


async def test_verify_task_runs_the_correct_and_wrong_solutions(wire, platform):
    """On GPU `null` every run passes, so the wrong solutions are reported as passing when they should not."""
    admin = Person(9601, "organiser", roles=(role(wire, ADMIN_ROLE),))
    token = admin_command(wire, admin, "verify-task", option("directory", "examples/identity_py"),
                          option("gpu", "null"), option("mode", "test"))
    report = await wire.answer(token, "verify-task", timeout=120)
    assert report.startswith("**verify-task `examples/identity_py` on null**")
    assert "✅ correct/empty_copy.py" in report and "test: passed, as expected" in report
    for wrong in ("wrong/alias_input.py", "wrong/zeros.py"):
        assert f"❌ {wrong}" in report
    assert report.count("test: passed, expected it to fail") == 2
    # the scratch board is gone again, and was never posted or announced
    forum = int(wire.layout.forum_channel)
    assert not any(t["name"].startswith("verify-") for t in wire.fake.threads_of(forum))
    await eventually(lambda: not any(b["name"].startswith("verify-identity_py")
                                     for b in platform.http.get("/leaderboards").json()), 30,
                     lambda: "the scratch board's deletion")
