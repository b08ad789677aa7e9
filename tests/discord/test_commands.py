"""Slash commands against the fake Discord and the real platform: layout, admission refusals, admin checks."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx

from schemas.events import SubmissionReceived
from services.core.readmodel import board_reads, submission_reads
from services.kit.bus import publish_all
from services.kit.embedded.common import free_port
from tests.discord.wire import Person, option, start_bot
from tests.support.fake_discord import FakeDiscord, user_payload

ADMIN_ROLE = "Leaderboard Admin"


def _submit(wire, person, mode: str, name: str, content: bytes, *extra: dict) -> str:
    attachment = wire.fake.add_attachment(name, content)
    options = [option("script", attachment["id"], 11), *extra]
    return wire.interact(person, "leaderboard", [{"name": "submit", "type": 2, "options": [
        {"name": mode, "type": 1, "options": options}]}], attachments=[attachment])


async def test_first_start_lays_out_the_server_and_syncs_commands(wire):
    fake: FakeDiscord = wire.fake
    category = fake.channel_named("Leaderboards")
    assert category is not None and category["type"] == 4
    for name, kind in (("general", 0), ("submissions", 0), ("central", 15)):
        channel = fake.channel_named(name)
        assert channel is not None and channel["type"] == kind and channel["parent_id"] == category["id"], name
    assert {"Leaderboard Admin", "Leaderboard Creator", "Leaderboard Participant"} <= {
        r["name"] for r in fake.roles.values()}
    names = {c["name"] for c in fake.commands}
    assert {"leaderboard", "admin", "ping", "verifydb", "verifyruns"} <= names
    board = next(c for c in fake.commands if c["name"] == "leaderboard")
    submit = next(o for o in board["options"] if o["name"] == "submit")
    assert {o["name"] for o in submit["options"]} == {"test", "benchmark", "profile", "ranked"}
    assert {"list", "show", "show-personal", "task", "template", "get-submission", "help"} <= {
        o["name"] for o in board["options"]}

    # a second start finds everything and creates nothing twice
    def counts():
        return sum(1 for c in fake.channels.values() if c["type"] not in (11, 12)), len(fake.roles)

    before = counts()
    again = await start_bot(fake, wire.client.ctx.settings.nats_url, wire.client.ctx.settings.database_url)
    await again.client.close()
    assert counts() == before == (4, 4)


async def test_an_admin_command_is_refused_without_the_role(wire):
    nobody = Person(7001, "nobody")
    token = wire.interact(nobody, "admin", [{"name": "stats", "type": 1, "options": []}])
    assert "needs the Leaderboard Admin role" in await wire.answer(token)

    stop = wire.interact(nobody, "admin", [{"name": "stop", "type": 1, "options": []}])
    assert "needs the Leaderboard Admin role" in await wire.answer(stop)
    admin_role = int(wire.fake.role_named(ADMIN_ROLE)["id"])
    admin = Person(7002, "admin", roles=(admin_role,))
    stats = wire.interact(admin, "admin", [{"name": "stats", "type": 1, "options": []}])
    assert "num_submissions = " in await wire.answer(stats)
    # the role alone is not Discord's Administrator permission, which resync also needs
    resync = wire.interact(admin, "admin", [{"name": "resync", "type": 1, "options": []}])
    assert "Administrator permission" in await wire.answer(resync)
    verify = wire.interact(nobody, "verifydb", [])
    assert "needs the Leaderboard Admin role" in await wire.answer(verify)
    verify = wire.interact(admin, "verifydb", [])
    assert "✅ database round trip" in await wire.answer(verify)


async def test_non_utf8_file_is_refused_and_nothing_is_recorded(wire, platform):
    alice = Person(7003, "alice")
    before = len(platform.http.get("/submissions/identity_py/cpu").json())
    token = _submit(wire, alice, "test", "bad.py", b"\xff\xfe\x00not text",
                    option("leaderboard", "identity_py"))
    assert await wire.answer(token, "❌") == "❌ Failed to decode submission file content as UTF-8."
    assert len(platform.http.get("/submissions/identity_py/cpu").json()) == before


async def test_submissions_belong_in_the_submissions_channel(wire):
    alice = Person(7004, "alice")
    attachment = wire.fake.add_attachment("ok.py", b"print(1)\n")
    token = wire.interact(alice, "leaderboard", [{"name": "submit", "type": 2, "options": [
        {"name": "test", "type": 1, "options": [option("script", attachment["id"], 11)]}]}],
        attachments=[attachment], channel_id=wire.layout.general_channel)
    assert "Submissions go to" in await wire.answer(token)


async def test_closed_leaderboard_refuses_discord_submissions(wire):
    alice = Person(7005, "alice")
    code = b"#!POPCORN leaderboard closed_board\nprint(1)\n"
    token = _submit(wire, alice, "test", "sub.py", code)
    assert await wire.answer(token, "❌") == "❌ Closed leaderboards only accept submissions via CLI"


async def _banned(database_url: str, user_id: str) -> bool:

    conn = await asyncpg.connect(database_url)
    try:
        return bool(await conn.fetchval("SELECT banned FROM users WHERE user_id = $1", user_id))
    finally:
        await conn.close()


async def test_banned_user_is_refused(wire, platform):
    mallory = Person(7006, "mallory")
    platform.register(str(mallory.user_id), "mallory")  # a Discord user known to the platform
    admin = Person(7007, "admin", roles=(int(wire.fake.role_named(ADMIN_ROLE)["id"]),))

    def moderate(action: str) -> str:
        return wire.interact(admin, "admin", [{"name": action, "type": 1, "options": [
            option("user", str(mallory.user_id), 6)]}], users=[user_payload(mallory.user_id, mallory.name)])

    assert "is banned" in await wire.answer(moderate("ban"), "is banned")
    assert await _banned(platform.database_url, str(mallory.user_id))  # answered once the read model shows it
    token = _submit(wire, mallory, "test", "sub.py", b"print(1)\n", option("leaderboard", "identity_py"),
                    option("gpu", "cpu"))
    assert await wire.answer(token, "❌") == "❌ You are banned from making submissions."

    assert "may submit again" in await wire.answer(moderate("unban"), "may submit again")
    assert not await _banned(platform.database_url, str(mallory.user_id))

    # as the gateway's POST /admin/ban answers 404: a user the platform never saw cannot be banned (the ban would
    # have no row to mark and be lost)
    stranger = Person(7016, "stranger")
    unknown = wire.interact(admin, "admin", [{"name": "ban", "type": 1, "options": [
        option("user", str(stranger.user_id), 6)]}], users=[user_payload(stranger.user_id, stranger.name)])
    assert await wire.answer(unknown, "❌") == "❌ stranger has never used the platform."


async def test_admin_stops_and_starts_intake_and_the_read_model_shows_it_at_the_answer(wire, platform):
    admin = Person(7017, "admin", roles=(int(wire.fake.role_named(ADMIN_ROLE)["id"]),))

    async def accepting() -> bool:
        conn = await asyncpg.connect(platform.database_url)
        try:
            return await conn.fetchval("SELECT NOT EXISTS (SELECT 1 FROM intake WHERE NOT accepting)")
        finally:
            await conn.close()

    stop = wire.interact(admin, "admin", [{"name": "stop", "type": 1, "options": []}])
    assert await wire.answer(stop, "Intake stopped") == "⏸ Intake stopped: new submissions are refused."
    assert await accepting() is False
    start = wire.interact(admin, "admin", [{"name": "start", "type": 1, "options": []}])
    assert await wire.answer(start, "Intake open") == "▶ Intake open."
    assert await accepting() is True


async def test_read_commands_answer_from_the_read_model(wire):
    alice = Person(7008, "alice")

    def sub(name: str, *options: dict) -> str:
        return wire.interact(alice, "leaderboard", [{"name": name, "type": 1, "options": list(options)}])

    listing = await wire.answer(sub("list"))
    assert "`identity_py` · cpu" in listing and "`vectoradd_py`" in listing and "closed" in listing

    task = sub("task", option("leaderboard", "identity_py"))
    assert "Return a copy of a 1-D float32 tensor" in await wire.answer(task)
    files = {name for name, _ in wire.fake.original(task)["files"]}
    assert {"reference.py", "task.py", "eval.py"} <= files and "submission.py" not in files  # no @SUBMISSION@

    template = sub("template", option("leaderboard", "identity_py"))
    await wire.answer(template, "Starter code")
    [(name, content)] = wire.fake.original(template)["files"]
    assert name == "identity_py_template.py"
    assert content.decode().startswith("#!POPCORN leaderboard identity_py\n")

    closed = sub("show", option("leaderboard", "closed_board"))
    assert "closed" in await wire.answer(closed)
    missing = sub("get-submission", option("submission_id", 1, 4))
    assert await wire.answer(missing) == "❌ Submission not found among yours."
    assert "KernelBot" in await wire.answer(sub("help"))
    assert (await wire.answer(wire.interact(alice, "ping", []))).startswith("pong")


async def test_admin_creates_a_dev_leaderboard_and_deletes_a_submission_after_confirming(wire, platform):
    admin = Person(7009, "admin", roles=(int(wire.fake.role_named(ADMIN_ROLE)["id"]),))
    create = wire.interact(admin, "admin", [{"name": "create-dev-leaderboard", "type": 1, "options": [
        option("directory", "examples/identity_py"), option("gpu", "cpu")]}])
    assert await wire.answer(create) == "✅ Created `identity_py-dev`."
    escape = wire.interact(admin, "admin", [{"name": "create-dev-leaderboard", "type": 1, "options": [
        option("directory", "../../etc"), option("gpu", "cpu")]}])
    assert "No problem directory" in await wire.answer(escape)

    pool = wire.client.ctx.pool
    for _ in range(200):  # the board is an event: wait until the ledger shows it
        if await board_reads.leaderboard(pool, "identity_py-dev") is not None:
            break
        await asyncio.sleep(0.05)

    # creating it again replaces it (as the gateway's POST /admin/leaderboards does), and it lives a year
    first = await board_reads.leaderboard(pool, "identity_py-dev")
    again = wire.interact(admin, "admin", [{"name": "create-dev-leaderboard", "type": 1, "options": [
        option("directory", "examples/identity_py"), option("gpu", "cpu")]}])
    assert await wire.answer(again) == "✅ Created `identity_py-dev`."
    for _ in range(200):
        replaced = await board_reads.leaderboard(pool, "identity_py-dev")
        if replaced is not None and replaced["id"] != first["id"]:
            break
        await asyncio.sleep(0.05)
    assert replaced["id"] != first["id"]
    assert timedelta(days=364) < replaced["deadline"] - datetime.now(UTC) <= timedelta(days=365)

    def delete_board(confirm: str) -> str:
        return wire.interact(admin, "admin", [{"name": "delete-leaderboard", "type": 1, "options": [
            option("leaderboard", "identity_py-dev"), option("confirm_name", confirm)]}])

    assert "Type the leaderboard's name, `identity_py-dev`" in await wire.answer(delete_board("identity_py"))
    assert await wire.answer(delete_board("identity_py-dev")) == "✅ Deleted `identity_py-dev`."

    submission_id = await submission_reads.next_submission_id(pool)
    await publish_all(platform.nats_url, [SubmissionReceived(
        submission_id=submission_id, leaderboard="two_gpus", gpus=["unserved_gpu"], mode="test", user_id="42",
        user_name="someone", file_name="s.py", code="print(1)\n")])
    for _ in range(200):
        if await submission_reads.submission(pool, submission_id) is not None:
            break
        await asyncio.sleep(0.05)
    delete = wire.interact(admin, "admin", [{"name": "delete-submission", "type": 1, "options": [
        option("submission_id", submission_id, 4)]}])
    await wire.answer(delete, "Delete submission")
    buttons = wire.fake.original(delete)["components"][0]["components"]
    confirm = next(b["custom_id"] for b in buttons if b["label"] == "Delete")
    await wire.click(Person(7010, "other"), delete, confirm, 2)  # only the admin who asked may confirm
    await asyncio.sleep(0.3)
    assert await submission_reads.submission(pool, submission_id) is not None
    await wire.click(admin, delete, confirm, 2)
    await wire.answer(delete, f"✅ Submission {submission_id} deleted.")
    for _ in range(200):
        if await submission_reads.submission(pool, submission_id) is None:
            break
        await asyncio.sleep(0.05)
    assert await submission_reads.submission(pool, submission_id) is None


async def test_a_look_alike_admin_role_grants_nothing(wire):
    fake = wire.fake
    impostor_role = fake.next_id()
    fake.roles[impostor_role] = {**fake.role_named(ADMIN_ROLE), "id": str(impostor_role)}
    wire.client._connection.parse_guild_create(fake.guild_create_payload())
    token = wire.interact(Person(7011, "impostor", roles=(impostor_role,)), "admin",
                          [{"name": "stop", "type": 1, "options": []}])
    assert "needs the Leaderboard Admin role" in await wire.answer(token)


async def test_the_bot_serves_health_readiness_and_metrics_like_every_service(fake_discord, platform):
    port = free_port()
    running = await start_bot(fake_discord, platform.nats_url, platform.database_url, metrics_port=port)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            assert (await http.get("/health")).json() == {"status": "ok"}
            ready = await http.get("/ready")
            assert (ready.status_code, ready.json()) == (200, {"status": "ready"})
            metrics = (await http.get("/metrics")).text
            assert "# TYPE kb_events_handled_total counter" in metrics and "kb_consumer_pending" in metrics
    finally:
        await running.client.close()
    # once closed, nothing answers on the port any more
    async with httpx.AsyncClient(timeout=2) as http:
        try:
            await http.get(f"http://127.0.0.1:{port}/health")
            raise AssertionError("the status server outlived the bot")
        except httpx.TransportError:
            pass
