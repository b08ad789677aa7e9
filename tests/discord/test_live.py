"""Live progress from events: a ranked submission through the slash command, across a bot restart, to its verdict."""

from __future__ import annotations

from datetime import UTC, datetime

import asyncpg
import pytest

from problems import PROBLEMS_ROOT
from schemas.contracts import FullResult
from schemas.events import RunCompleted, RunStarted, SubmissionFinished
from services.core.presentation import reports, results
from services.core.readmodel import submission_reads
from services.discord import repository, texts
from services.kit import db
from services.kit.bus import publish_all
from tests.discord.wire import Person, eventually, old, option, start_bot
from tests.support.platform import identity_board

VECTORADD = PROBLEMS_ROOT / "examples" / "vectoradd_py" / "submission.py"


async def gateway_reports(database_url: str, submission_id: int, gpus: list[str]) -> list[str]:
    """The report the gateway gives popcorn-cli for each public run of a submission
    (docs/http-api.md "The streaming submit")."""
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=2,
                                     init=db._init_connection)
    try:
        outcomes = results.outcomes(await submission_reads.run_requests(pool, submission_id),
                                    await submission_reads.submission_runs(pool, submission_id), gpus)
    finally:
        await pool.close()
    return [reports.report(o.gpu, o.backend, o.mode, secret=o.secret, result=o.result)
            for o in outcomes if not o.secret]


async def ranked_submission_to_verdict(wire, platform, person: Person, board: str, gpu: str, backend: str) -> None:
    """A ranked submission through the slash command, with a bot restart after it was recorded, ends with the
    verdict, the podium, the status lines, and a thread holding exactly the gateway's report of the public run."""
    fake = wire.fake
    cli_id = platform.register(str(person.user_id), person.name)  # the same person, also on popcorn-cli
    attachment = fake.add_attachment("add.py", f"#!POPCORN leaderboard {board}\n".encode() + VECTORADD.read_bytes())
    token = wire.interact(person, "leaderboard", [{"name": "submit", "type": 2, "options": [
        {"name": "ranked", "type": 1, "options": [option("script", attachment["id"], 11)]}]}],
        attachments=[attachment])
    queued = await wire.answer(token, "**Submission ")
    submission_id = int(queued.split("**Submission ")[1].split("**")[0])
    assert f"ranked run of `{board}` on {gpu}" in queued

    # the bot restarts: the next one picks up the stored reply and keeps editing it
    await wire.client.close()
    again = await start_bot(fake, platform.nats_url, platform.database_url)
    channel = int(again.layout.submissions_channel)
    try:
        final = await again.answer(token, (f"Submission {submission_id} finished", f"Submission {submission_id} failed"),
                                   timeout=120)
        assert final.endswith(f"✅ Submission {submission_id} finished."), final
        await eventually(lambda: any(f"place on `{board}` on {gpu}" in m["content"]
                                     for m in fake.messages_in(channel)), 30, lambda: "the verdict")
        await eventually(lambda: any(f"**{person.name}** took first place on `{board}`" in m["content"]
                                     or f"**{person.name}** entered the top three on `{board}`" in m["content"]
                                     for m in fake.messages_in(channel)), 30, lambda: "the podium")
    finally:
        await again.client.close()

    view = platform.submission(cli_id, submission_id)
    assert view["job"]["status"] == "succeeded"
    score = next(r["score"] for r in view["runs"] if r["mode"] == "leaderboard" and not r["secret"])
    # the user's verdict (the podium's announcement says "took first place on" the board, without the GPU)
    [verdict] = [m["content"] for m in fake.messages_in(channel) if f"place on `{board}` on {gpu}:" in m["content"]]
    assert verdict == f"<@{person.user_id}> 🥇 1st place on `{board}` on {gpu}: {texts.score_text(score)}"

    # status lines: the public and the secret run, each with the short lines of docs/quickstart.md
    assert f"**{gpu} on {backend} ✅ success**" in final and f"**{gpu} on {backend} (secret) ✅ success**" in final
    assert "> ✅ Leaderboard run successful" in final

    # one private thread, for the public run only, holding exactly the gateway's report in pieces
    threads = [t for t in fake.threads_of(channel) if t["name"].startswith(f"Submission {submission_id}:")]
    assert len(threads) == 1 and threads[0]["type"] == 12
    assert person.user_id in fake.thread_members[int(threads[0]["id"])]
    posted = [m["content"] for m in fake.messages_in(int(threads[0]["id"]))]
    [expected] = await gateway_reports(platform.database_url, submission_id, [gpu])
    assert posted == reports.chunk(expected)
    assert "Ranked Benchmark" in expected  # the long report, not only the status lines

    # afterwards: the owner sees the submission without its secret runs, an admin with them
    def ask(who: Person, group: str, name: str, *options: dict) -> str:
        return wire_after.interact(who, group, [{"name": name, "type": 1, "options": list(options)}])

    wire_after = await start_bot(fake, platform.nats_url, platform.database_url)
    try:
        personal = await wire_after.answer(ask(person, "leaderboard", "show-personal", option("leaderboard", board)))
        assert f"`{submission_id}` add.py" in personal, personal
        own = await wire_after.answer(ask(person, "leaderboard", "get-submission",
                                          option("submission_id", submission_id, 4)))
        assert f"**Submission {submission_id}**" in own and "leaderboard: ✅ passed" in own and "(secret)" not in own
        admin = Person(person.user_id + 1, "judge", roles=(int(fake.role_named("Leaderboard Admin")["id"]),))
        full = await wire_after.answer(ask(admin, "admin", "get-submission", option("submission_id", submission_id, 4)))
        assert "leaderboard (secret): ✅ passed" in full and "leaderboard: ✅ passed" in full, full
    finally:
        await wire_after.client.close()


@pytest.mark.slow
async def test_ranked_submission_ends_with_a_verdict_and_the_gateway_report(wire, platform):
    """Every part of the platform is real except the harness (GPU `null`: the dispatcher's null backend)."""
    await ranked_submission_to_verdict(wire, platform, Person(8001, "bob"), "fast_board", "null", "null")


@pytest.mark.slow
async def test_ranked_submission_on_a_real_runner(wire, platform):
    """The same through the local runner and the real harness (a minute or more on a busy 2-core machine)."""
    await ranked_submission_to_verdict(wire, platform, Person(8006, "grace"), "vectoradd_py", "cpu", "local")


async def test_ambiguous_gpu_is_chosen_from_a_menu(wire, platform):
    carol = Person(8002, "carol")
    code = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_bytes()
    attachment = wire.fake.add_attachment("id.py", code)
    token = wire.interact(carol, "leaderboard", [{"name": "submit", "type": 2, "options": [
        {"name": "test", "type": 1, "options": [option("script", attachment["id"], 11),
                                                option("leaderboard", "two_gpus")]}]}], attachments=[attachment])
    await wire.answer(token, "which ones?")
    menu = wire.fake.original(token)["components"][0]["components"][0]
    assert [o["value"] for o in menu["options"]] == ["cpu", "unserved_gpu"] and menu["max_values"] == 2

    await wire.click(Person(8003, "dave"), token, menu["custom_id"], 3, ["cpu"])  # not the submitter: ignored
    await wire.click(carol, token, menu["custom_id"], 3, ["unserved_gpu"])
    reply = await wire.answer(token, "queued")
    assert "test run of `two_gpus` on unserved_gpu" in reply


async def test_long_report_is_cut_under_the_message_limit(wire, platform):
    """A public run whose output is far over 2000 characters arrives in several messages, fences intact."""
    eve = Person(8004, "eve")
    pool = wire.client.ctx.pool
    submission_id = await submission_reads.next_submission_id(pool)
    async with pool.acquire() as conn:  # a Discord submission whose reply is gone: only its thread is watched
        await repository.track_submission(
            conn, submission_id=submission_id, user_id=str(eve.user_id), user_name="eve", leaderboard="identity_py",
            mode="test", gpus=["cpu"], channel_id=wire.layout.submissions_channel, application_id=1, token="gone",
            issued_at=datetime.now(UTC), message_id=None)
    noisy = "\n".join(f"line {i}: " + "x" * 70 for i in range(150))
    result = FullResult(success=True, runs={"test": {"compilation": None, "run": {
        "success": True, "passed": True, "command": "python eval.py test", "stdout": noisy, "stderr": "",
        "exit_code": 0, "duration": 1.5, "result": {"test-count": "1", "test.0.spec": "size: 1",
                                                     "test.0.status": "pass", "check": "pass"}}}})
    run_id = f"{submission_id}-long"
    # a bot stopped between creating the run's thread and storing its id: the next one must find it, not add one
    await repository.request_thread(pool, run_id, submission_id, "cpu")
    channel = wire.layout.submissions_channel
    orphan = int(wire.fake.make_thread(channel, f"Submission {submission_id}: test on cpu")["id"])
    await publish_all(platform.nats_url, [
        RunStarted(run_id=run_id, submission_id=submission_id, gpu="cpu"),
        RunCompleted(run_id=run_id, submission_id=submission_id, leaderboard="identity_py", gpu="cpu", mode="test",
                     result=result)])

    def thread_messages():
        threads = [t for t in wire.fake.threads_of(channel) if t["name"].startswith(f"Submission {submission_id}:")]
        return [m["content"] for m in wire.fake.messages_in(int(threads[0]["id"]))] if threads else []

    await eventually(lambda: "line 149" in "".join(thread_messages()), 30, lambda: "the long report")
    pieces = thread_messages()
    assert len(pieces) >= 6 and all(len(p) <= 2000 for p in pieces)
    for piece in pieces:  # every piece renders alone: its code fences are balanced
        assert sum(1 for line in piece.split("\n") if line.startswith("```")) % 2 == 0
    assert "".join(pieces).count("line 7: ") == 1
    threads = [t for t in wire.fake.threads_of(channel) if t["name"].startswith(f"Submission {submission_id}:")]
    assert [int(t["id"]) for t in threads] == [orphan]
    assert eve.user_id in wire.fake.thread_members[orphan]


async def test_a_new_public_leaderboard_gets_a_forum_post(wire, platform):
    await publish_all(platform.nats_url, [identity_board("fresh_board", ["cpu"])])
    forum = int(wire.layout.forum_channel)
    await eventually(lambda: any(t["name"] == "fresh_board" for t in wire.fake.threads_of(forum)), 20,
                     lambda: "the forum post")


async def test_after_the_token_expires_the_outcome_is_posted_in_the_channel(wire, platform):
    """Interaction tokens live 15 minutes: a later outcome cannot edit the reply, so it goes to the channel."""
    frank = Person(8005, "frank")
    pool = wire.client.ctx.pool
    submission_id = await submission_reads.next_submission_id(pool)
    async with pool.acquire() as conn:
        await repository.track_submission(
            conn, submission_id=submission_id, user_id=str(frank.user_id), user_name="frank",
            leaderboard="identity_py", mode="test", gpus=["cpu"], channel_id=wire.layout.submissions_channel,
            application_id=1, token="expired", issued_at=old(20), message_id=12345)
    await publish_all(platform.nats_url, [SubmissionFinished(submission_id=submission_id, status="failed",
                                                             error="test failed on cpu: 1/4 tests passed")])
    channel = wire.layout.submissions_channel
    await eventually(lambda: any(f"Submission {submission_id} failed" in m["content"]
                                 for m in wire.fake.messages_in(channel)), 20, lambda: "the channel message")
    [posted] = [m["content"] for m in wire.fake.messages_in(channel) if f"Submission {submission_id}" in m["content"]]
    assert posted.startswith(f"<@{frank.user_id}> **Submission {submission_id}**")
    assert posted.endswith(f"❌ Submission {submission_id} failed: test failed on cpu: 1/4 tests passed")
    assert not any(path.endswith("/messages/12345") for _, path in wire.fake.requests)  # no edit was tried


async def test_verifyruns_runs_a_known_solution_on_every_gpu_of_a_board(wire, platform):
    admin_role = int(wire.fake.role_named("Leaderboard Admin")["id"])
    token = wire.interact(Person(8007, "admin", roles=(admin_role,)), "verifyruns",
                          [option("leaderboard", "fast_board")])
    final = await wire.answer(token, ("finished", "failed", "❌"), timeout=60)
    assert "test run of `fast_board` on null" in final and "**null on null ✅ success**" in final
    assert final.endswith("finished.")
