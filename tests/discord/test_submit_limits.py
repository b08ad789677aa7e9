"""What one Discord user can make the platform hold: the gateway's per-user submit rate (KB_SUBMIT_RATE) holds for
the bot's submissions too, and a file past the size limit is refused from the size Discord declares, never
downloaded. The fake Discord serves the attachments and records every request the bot makes."""

from __future__ import annotations

import asyncio

from problems import PROBLEMS_ROOT
from tests.discord.wire import Person, option, start_bot
from tests.support.events import archived

ACCEPTED_OR_REFUSED = ("**Submission", "❌")  # the live message's header, or the refusal
CODE = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_bytes()


def _submit(wire, person: Person, name: str, content: bytes) -> tuple[str, dict]:
    attachment = wire.fake.add_attachment(name, content)
    options = [option("script", attachment["id"], 11), option("leaderboard", "fast_board")]
    token = wire.interact(person, "leaderboard", [{"name": "submit", "type": 2, "options": [
        {"name": "test", "type": 1, "options": options}]}], attachments=[attachment])
    return token, attachment


async def eventually(condition, what, timeout: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await condition():
        assert asyncio.get_running_loop().time() < deadline, f"timed out; last: {await what()}"
        await asyncio.sleep(0.2)


async def _received(database_url: str) -> list[str]:
    """Who each recorded submission is from."""
    events = await asyncio.to_thread(archived, database_url, "SubmissionReceived")
    return [event["user_id"] for event in events]


async def test_a_discord_user_meets_the_same_submit_rate_as_through_the_gateway(fake_discord, platform):
    wire = await start_bot(fake_discord, platform.nats_url, platform.database_url, submit_rate="2/minute")
    try:
        dora, eve = Person(7401, "dora"), Person(7402, "eve")
        answers = []
        for _ in range(3):
            token, _ = _submit(wire, dora, "sub.py", CODE)
            answers.append(await wire.answer(token, ACCEPTED_OR_REFUSED))
        assert ["❌" in answer for answer in answers] == [False, False, True], answers
        assert answers[-1].startswith("❌ Too many requests: at most 2 per 1 minute submissions per user"), answers
        # the rate is per user: someone else still submits
        token, _ = _submit(wire, eve, "sub.py", CODE)
        assert "❌" not in await wire.answer(token, ACCEPTED_OR_REFUSED)
        # recorded (archived by the ledger) twice for dora, once for eve, and no more
        async def counts() -> tuple[int, int]:
            received = await _received(platform.database_url)
            return received.count("7401"), received.count("7402")

        async def recorded() -> bool:
            return await counts() == (2, 1)

        await eventually(recorded, counts)
        await asyncio.sleep(1)
        assert await counts() == (2, 1)
    finally:
        await wire.client.close()


async def test_an_oversized_attachment_is_refused_without_downloading_it(wire, platform):
    frank = Person(7403, "frank")
    token, attachment = _submit(wire, frank, "big.py", b"#" * 2_000_001)
    assert await wire.answer(token, "❌") == "❌ Submission file is too large (limit: 1MB)."
    path = attachment["url"].removeprefix(wire.fake.url)
    assert ("GET", path) not in wire.fake.requests
    # a file within the limit is still downloaded and judged
    token, attachment = _submit(wire, frank, "sub.py", CODE)
    assert "❌" not in await wire.answer(token, ACCEPTED_OR_REFUSED)
    assert ("GET", attachment["url"].removeprefix(wire.fake.url)) in wire.fake.requests
