"""Upstream KernelBot's Discord habits, each on the wire (the fake Discord's gateway payloads and HTTP API):
update-problems that syncs reference-kernels and takes `closed`, create-local with `closed` and directory
completion, /verify-task at the top level, bans of popcorn-cli-only users, show-stats per leaderboard, template
languages, display names in rankings, the top-three announcement's rule, and the staging bot."""

from __future__ import annotations

import asyncio
import uuid

from problems import PROBLEMS_ROOT
from schemas.events import LeaderboardRankChanged, RankEntry
from services.core.readmodel import board_reads
from services.discord.bot import KernelBotClient
from services.discord.settings import DiscordSettings
from services.discord.texts import score_text
from services.kit.bus import publish_all
from tests.discord.wire import Person, Wire, eventually, option, start_bot
from tests.problems.test_sync_platform import FIXTURE
from tests.support.archive_server import serve_archive
from tests.support.fake_discord import GUILD_ID
from tests.support.platform import identity_board

ADMIN_ROLE = "Leaderboard Admin"


def admin(wire, user_id: int) -> Person:
    return Person(user_id, "organiser", roles=(int(wire.fake.role_named(ADMIN_ROLE)["id"]),))


def admin_command(wire, person: Person, name: str, *options: dict) -> str:
    return wire.interact(person, "admin", [{"name": name, "type": 1, "options": list(options)}])


def choices_of(wire, token: str) -> list[str] | None:
    body = wire.fake.interaction_responses.get(token)
    return [c["value"] for c in body["data"]["choices"]] if body else None


async def completed(wire, token: str) -> list[str]:
    await eventually(lambda: choices_of(wire, token) is not None, 20, lambda: "the choices")
    return choices_of(wire, token)


async def add_boards(wire, platform, *boards) -> None:
    await publish_all(platform.nats_url, list(boards))
    for board in boards:
        await board_shown(wire.client.ctx.pool, board.name)


async def board_shown(pool, name: str) -> dict:
    for _ in range(400):  # a board is an event: wait until the ledger shows it
        row = await board_reads.leaderboard(pool, name)
        if row is not None:
            return row
        await asyncio.sleep(0.05)
    raise AssertionError(f"{name} never reached the read model")


async def test_update_problems_without_a_repository_syncs_reference_kernels_and_takes_closed(fake_discord, platform):
    with serve_archive(FIXTURE) as archive_url:  # reference-kernels' main branch, and nothing else
        wire = await start_bot(fake_discord, platform.nats_url, platform.database_url, problems_archive_url=archive_url)
        try:
            organiser = admin(wire, 9801)
            closed = await wire.answer(admin_command(wire, organiser, "update-problems", option("problem_set", "bioml"),
                                                     option("closed", True, 5)), ("✅", "❌"))
            assert closed == "✅ created 1, updated 0, skipped 0: trimul", closed
            assert (await board_shown(wire.client.ctx.pool, "trimul"))["visibility"] == "closed"
            every = await wire.answer(admin_command(wire, organiser, "update-problems"), ("✅", "❌"))
            assert every.startswith("✅ created 3, updated 0, skipped 1: ") and "vectoradd_v2" in every, every
            assert (await board_shown(wire.client.ctx.pool, "vectoradd_v2"))["visibility"] == "public"
            other = await wire.answer(admin_command(wire, organiser, "update-problems",
                                                    option("repository", "someone/elsewhere")), ("✅", "❌"))
            assert other.startswith("❌ ") and "404" in other, other  # a named repository is fetched instead
        finally:
            await wire.client.close()


async def test_create_local_takes_closed_and_completes_problem_directories(wire):
    organiser = admin(wire, 9802)
    token = wire.interact(organiser, "admin", [{"name": "create-local", "type": 1, "options": [
        {"name": "directory", "type": 3, "value": "prefix", "focused": True}]}], kind=4)
    assert await completed(wire, token) == ["examples/prefixsum_py"]
    every = wire.interact(organiser, "admin", [{"name": "create-local", "type": 1, "options": [
        {"name": "directory", "type": 3, "value": "", "focused": True}]}], kind=4)
    assert {"examples/identity_py", "examples/softmax_py", "examples/vectoradd_py"} <= set(await completed(wire, every))

    created = admin_command(wire, organiser, "create-local", option("directory", "examples/prefixsum_py"),
                            option("gpu", "cpu"), option("closed", True, 5))
    assert await wire.answer(created) == "✅ Created `prefixsum_py-dev` (closed)."
    assert (await board_shown(wire.client.ctx.pool, "prefixsum_py-dev"))["visibility"] == "closed"


async def test_verify_task_answers_at_the_top_level_too(wire):
    assert "verify-task" in {c["name"] for c in wire.fake.commands}
    refused = wire.interact(Person(9803, "nobody"), "verify-task", [option("directory", "examples/identity_py")])
    assert "needs the Leaderboard Admin role" in await wire.answer(refused)
    organiser = admin(wire, 9804)
    escape = wire.interact(organiser, "verify-task", [option("directory", "../..")])
    assert "No problem directory" in await wire.answer(escape)
    # the same command as /admin verify-task: a scratch board, every solution run, a report (GPU `null` passes all)
    ran = wire.interact(organiser, "verify-task", [option("directory", "examples/identity_py"), option("gpu", "null"),
                                                   option("mode", "test")])
    report = await wire.answer(ran, "**verify-task", timeout=120)
    assert report.startswith("**verify-task `examples/identity_py` on null**") and "correct/" in report, report


async def test_ban_takes_a_popcorn_cli_user_by_id_or_name(wire, platform):
    cli_id = platform.register("gh-31337", "octo-coder")  # signed in with GitHub: no Discord account to pick
    organiser = admin(wire, 9805)

    def moderate(action: str, *options: dict) -> str:
        return admin_command(wire, organiser, action, *options)

    assert await wire.answer(moderate("ban", option("user_id", "Octo-Coder"))) == "🚫 octo-coder is banned."
    refused = platform.submit(cli_id, "fast_board", "null", "test", "print(1)\n")
    assert refused.status_code == 403 and "banned" in refused.text, refused.text
    assert await wire.answer(moderate("unban", option("user_id", "gh-31337"))) == "✅ octo-coder may submit again."
    assert platform.submit(cli_id, "fast_board", "null", "test", "print(1)\n").status_code == 202
    assert await wire.answer(moderate("ban")) == \
        "❌ Name the user: pick a Discord `user`, or give a `user_id` (or name)."
    assert await wire.answer(moderate("ban", option("user_id", "no-such-coder"))) == \
        "❌ no-such-coder has never used the platform."


async def test_show_stats_takes_a_leaderboard(wire, platform):
    def submit_to_two_boards() -> None:
        cli_id = platform.register("9806", "counter")
        for board in ("fast_board", "fast_pair"):
            response = platform.submit(cli_id, board, "null", "test", "print(1)\n")
            assert response.status_code == 202, response.text
            platform.wait_done(cli_id, response.json()["details"]["id"])

    await asyncio.to_thread(submit_to_two_boards)
    organiser = admin(wire, 9806)
    board = await wire.answer(admin_command(wire, organiser, "show-stats", option("leaderboard", "fast_board")))
    expected = platform.http.get("/admin/stats", params={"leaderboard_name": "fast_board"},
                                 headers={"Authorization": f"Bearer {platform.admin_token}"}).json()["stats"]
    everything = platform.http.get("/admin/stats", headers={"Authorization": f"Bearer {platform.admin_token}"})
    assert f"num_submissions = {expected['num_submissions']}\n" in board
    assert 1 <= expected["num_submissions"] < everything.json()["stats"]["num_submissions"]
    missing = admin_command(wire, organiser, "show-stats", option("leaderboard", "nope"))
    assert await wire.answer(missing) == "❌ Leaderboard `nope` does not exist."


async def test_template_offers_the_boards_languages_and_refuses_an_unknown_one(wire):
    viewer = Person(9807, "viewer")

    def template(*options: dict) -> str:
        return wire.interact(viewer, "leaderboard", [{"name": "template", "type": 1, "options": list(options)}])

    offered = wire.interact(viewer, "leaderboard", [{"name": "template", "type": 1, "options": [
        option("leaderboard", "identity_py"), {"name": "language", "type": 3, "value": "", "focused": True}]}],
        kind=4)
    assert await completed(wire, offered) == ["Python"]
    python = template(option("leaderboard", "identity_py"), option("language", "python"))
    assert await wire.answer(python) == "Starter code for `identity_py` (Python)."
    [(name, _)] = wire.fake.original(python)["files"]
    assert name == "identity_py_template.py"
    cuda = template(option("leaderboard", "identity_py"), option("language", "CUDA"))
    assert await wire.answer(cuda) == "❌ `identity_py` has no template for `CUDA`; choose one of: `Python`"


async def test_rankings_show_display_names_not_handles(wire, platform):
    ada = Person(9808, "ada_handle_9808", display_name="Ada Lovelace")
    await add_boards(wire, platform, identity_board("names_board", ["null"]))
    code = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_bytes()
    attachment = wire.fake.add_attachment("id.py", code)
    token = wire.interact(ada, "leaderboard", [{"name": "submit", "type": 2, "options": [
        {"name": "ranked", "type": 1, "options": [option("script", attachment["id"], 11),
                                                  option("leaderboard", "names_board"), option("gpu", "null")]}]}],
        attachments=[attachment])
    await wire.answer(token, "finished", timeout=120)
    shown = await wire.answer(wire.interact(ada, "leaderboard", [{"name": "show", "type": 1, "options": [
        option("leaderboard", "names_board")]}]), "names_board")
    assert "Ada Lovelace" in shown and "ada_handle" not in shown, shown
    # the same name for every front end: the HTTP API popcorn-cli and the web read
    [entry] = (await asyncio.to_thread(platform.http.get, "/submissions/names_board/null")).json()
    assert entry["user_name"] == "Ada Lovelace"


def rank_change(board: str, top: list[tuple[str, float]], previous: list[tuple[str, float]]) -> LeaderboardRankChanged:
    def entries(rows):
        return [RankEntry(rank=n + 1, user_id=user, user_name=f"Racer {user}", score=score, submission_id=n + 1)
                for n, (user, score) in enumerate(rows)]

    return LeaderboardRankChanged(leaderboard=board, gpu="null", top=entries(top), previous_top=entries(previous),
                                  caused_by_submission=uuid.uuid4().int % 2**62)


async def test_the_top_three_is_announced_on_a_new_first_or_a_change_of_who_is_in_it(wire, platform):
    await add_boards(wire, platform, identity_board("podium_board", ["null"]), identity_board("histogram_v2", ["null"]))
    channel = int(wire.layout.submissions_channel)
    before = len(wire.fake.messages_in(channel))
    a, b, c, d = ("a", 1.0e-6), ("b", 2.0e-6), ("c", 3.0e-6), ("d", 4.0e-6)
    await publish_all(platform.nats_url, [
        rank_change("podium_board", [a], []),  # the first score: a new #1
        rank_change("podium_board", [("a", 0.5e-6)], [a]),  # #1 improves: not news
        rank_change("podium_board", [a, b, c], [a, c, b]),  # #2 and #3 swap: not news
        rank_change("podium_board", [a, b, c], [a, b, d]),  # c enters, d leaves
        rank_change("histogram_v2", [a], []),  # a beginner board: never announced
        rank_change("podium_board", [b, a, c], [a, b, c]),  # a new #1
    ])
    await eventually(lambda: any("Racer b** took first place" in m["content"]
                                 for m in wire.fake.messages_in(channel)[before:]), 30, lambda: "the last podium")
    posted = [m["content"] for m in wire.fake.messages_in(channel)[before:] if "top three" in m["content"]
              or "first place" in m["content"]]
    assert posted == [
        f"🏆 **Racer a** took first place on `podium_board` (null): {score_text(1.0e-6)}",
        f"🥉 **Racer c** entered the top three on `podium_board` (null): {score_text(3.0e-6)}\n"
        "**Racer d** left the top three.",
        f"🏆 **Racer b** took first place on `podium_board` (null): {score_text(2.0e-6)}\n"
        "**Racer a** lost first place.",
    ], posted


async def test_the_staging_bot_logs_in_with_the_debug_token_on_the_debug_server(fake_discord, platform):
    settings = DiscordSettings(nats_url=platform.nats_url, database_url=platform.database_url,
                               discord_token="the-live-bot", discord_guild_id=GUILD_ID + 1, discord_debug=True,
                               discord_debug_token="fake-token", discord_debug_guild_id=GUILD_ID)
    client = KernelBotClient(settings)
    try:
        # the fake accepts only "Bot fake-token" and knows only GUILD_ID: the live token or server would fail here
        await client.login(client.ctx.settings.discord_token.get_secret_value())
        client._connection.parse_guild_create(fake_discord.guild_create_payload())
        wire = Wire(fake_discord, client)
        assert client.guild_object.id == GUILD_ID and "admin" in {c["name"] for c in fake_discord.commands}
        assert (await wire.answer(wire.interact(Person(9809, "tester"), "ping", []))).startswith("pong")
    finally:
        await client.close()
    assert not DiscordSettings(discord_token="live", discord_guild_id=1).for_the_bot().discord_debug
