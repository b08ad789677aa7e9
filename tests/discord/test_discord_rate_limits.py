"""Discord's rate limits against the bot: the fake answers a call 429 with Discord's `retry_after`, and the bot's
call lands once, after the wait."""

from __future__ import annotations

import time

from services.kit.bus import publish_all
from tests.discord.wire import Person, eventually
from tests.support.platform import identity_board

RETRY_AFTER_S = 0.5


async def test_an_answer_rate_limited_once_lands_once_after_the_wait(wire):
    admin = Person(7102, "limited-admin", roles=(int(wire.fake.role_named("Leaderboard Admin")["id"]),))
    wire.fake.rate_limits.add("POST", "/callback", times=1, retry_after=RETRY_AFTER_S)

    token = wire.interact(admin, "admin", [{"name": "stats", "type": 1, "options": []}])

    assert "num_submissions = " in await wire.answer(token)
    [(_, path, refused_at)] = wire.fake.rate_limits.limited
    assert path.endswith(f"/{token}/callback") and time.monotonic() - refused_at >= RETRY_AFTER_S
    callbacks = [p for method, p in wire.fake.requests if method == "POST" and p == path]
    assert len(callbacks) == 2  # refused once, sent again once: the interaction was answered a single time


async def test_a_post_still_rate_limited_after_discord_pys_own_tries_is_delivered_later_once(wire, platform,
                                                                                             caplog):
    """discord.py waits and asks again five times, then raises the 429: the bot's delivery keeps the call and
    tries it again later (services/discord/delivery.py), where a refusal would be set aside for good."""
    wire.fake.rate_limits.add("POST", "/threads", times=6, retry_after=0.05)

    await publish_all(platform.nats_url, [identity_board("limited_board", ["cpu"])])

    forum = int(wire.layout.forum_channel)
    await eventually(lambda: any(t["name"] == "limited_board" for t in wire.fake.threads_of(forum)), 30,
                     lambda: "the forum post")
    assert len(wire.fake.rate_limits.limited) == 6
    assert [t["name"] for t in wire.fake.threads_of(forum)].count("limited_board") == 1
    # kept by the delivery and tried again, not set aside as refused (a later sweep of missing posts would post
    # it too, so the post alone does not tell)
    said = [record.getMessage() for record in caplog.records if record.name == "kernelbot.discord"]
    assert any("forum_post" in line and "429" in line and line.endswith("retrying") for line in said), said
    assert not any(line.startswith("Discord refused forum_post") for line in said), said
