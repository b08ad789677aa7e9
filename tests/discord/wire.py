"""Driving the bot as Discord would: INTERACTION_CREATE payloads fed to discord.py's connection state."""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from datetime import UTC, datetime, timedelta

import discord

from services.discord.bot import KernelBotClient
from services.discord.settings import DiscordSettings
from tests.support.fake_discord import APP_ID, GUILD_ID, FakeDiscord, user_payload

_sequence = itertools.count(1)
ADMINISTRATOR = str(discord.Permissions(administrator=True).value)
PLAIN = str(discord.Permissions(send_messages=True, use_application_commands=True).value)


def snowflake(at: datetime | None = None) -> str:
    """An id minted at `at` (now): discord.py reads an interaction's age from its id."""
    return str(discord.utils.time_snowflake(at or datetime.now(UTC)) + next(_sequence))


class Person:
    def __init__(self, user_id: int, name: str, roles: tuple[int, ...] = (), administrator: bool = False,
                 display_name: str | None = None) -> None:
        self.user_id, self.name, self.roles, self.display_name = user_id, name, roles, display_name
        self.permissions = ADMINISTRATOR if administrator else PLAIN

    def member(self) -> dict:
        return {"user": user_payload(self.user_id, self.name, global_name=self.display_name), "roles": [str(r) for r in self.roles],
                "joined_at": datetime.now(UTC).isoformat(), "deaf": False, "mute": False, "flags": 0, "nick": None,
                "avatar": None, "premium_since": None, "pending": False, "communication_disabled_until": None,
                "permissions": self.permissions}


def option(name: str, value, kind: int = 3) -> dict:
    return {"name": name, "type": kind, "value": value}


class Wire:
    """A running bot against the fake Discord, and the payloads a person's actions become."""

    def __init__(self, fake: FakeDiscord, client: KernelBotClient) -> None:
        self.fake, self.client = fake, client

    @property
    def layout(self):
        return self.client.ctx.layout

    def command_id(self, name: str) -> str:
        return next(c["id"] for c in self.fake.commands if c["name"] == name)

    def interact(self, person: Person, name: str, options: list[dict], *, channel_id: int | None = None,
                 attachments: list[dict] = (), users: list[dict] = (), created: datetime | None = None,
                 kind: int = 2) -> str:
        """Feed one application command; returns its interaction token."""
        channel_id = channel_id or self.layout.submissions_channel
        token = f"token-{uuid.uuid4().hex}"
        data = {"id": self.command_id(name), "name": name, "type": 1, "guild_id": str(GUILD_ID), "options": options}
        if attachments or users:
            data["resolved"] = {"attachments": {a["id"]: a for a in attachments},
                                "users": {u["id"]: u for u in users}}
        self.client._connection.parse_interaction_create(self._payload(person, kind, token, data, channel_id,
                                                                       created))
        return token

    async def click(self, person: Person, message_token: str, custom_id: str, component_type: int,
                    values: list[str] | None = None) -> str:
        """A click on a component of the message the interaction `message_token` answered with, once the bot listens
        for it."""
        message = self.fake.original(message_token)
        # The fake shows the message's components when the bot's PATCH arrives, but discord.py starts listening for
        # them only after it reads the answer; a click in between is dropped without a word. A person cannot click
        # that fast: they see the message when Discord has answered the bot.
        views = self.client._connection._view_store
        await eventually(lambda: views.is_message_tracked(int(message["id"])), 10,
                         lambda: f"the bot to listen for clicks on message {message['id']}")
        token = f"token-{uuid.uuid4().hex}"
        self.fake.originals[token] = int(message["id"])  # Discord knows which message a component sits on
        data = {"custom_id": custom_id, "component_type": component_type}
        if values is not None:
            data["values"] = values
        payload = self._payload(person, 3, token, data, self.layout.submissions_channel, None)
        payload["message"] = message
        self.client._connection.parse_interaction_create(payload)
        return token

    def _payload(self, person: Person, kind: int, token: str, data: dict, channel_id: int,
                 created: datetime | None) -> dict:
        return {
            "id": snowflake(created), "application_id": str(APP_ID), "type": kind, "token": token, "version": 1,
            "guild_id": str(GUILD_ID), "channel_id": str(channel_id),
            "channel": {"id": str(channel_id), "type": 0, "guild_id": str(GUILD_ID), "name": "channel",
                        "position": 0, "permission_overwrites": [], "nsfw": False, "parent_id": None},
            "member": person.member(), "data": data, "locale": "en-US", "guild_locale": "en-US",
            "app_permissions": ADMINISTRATOR, "entitlements": [], "attachment_size_limit": 8 * 1024 * 1024,
            "authorizing_integration_owners": {"0": str(GUILD_ID)}, "context": 0,
        }

    async def answer(self, token: str, expect: str | tuple[str, ...] | None = None, timeout: float = 20.0) -> str:
        """The text of the reply to an interaction once it contains `expect`, or one of them (any reply: None)."""
        expected = (expect,) if isinstance(expect, str) else expect
        found = ""

        def text() -> str:
            nonlocal found
            original = self.fake.original(token)
            followups = [m["content"] for m in self.fake.messages.values() if m.get("followup_of") == token]
            found = "\n".join([original["content"] if original else "", *followups]).strip()
            return found

        await eventually(lambda: text() and (expected is None or any(e in text() for e in expected)), timeout,
                         lambda: f"reply containing {expect!r}; last: {found!r}")
        return found


async def eventually(condition, timeout: float = 20.0, what=lambda: "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what()}")


async def start_bot(fake: FakeDiscord, nats_url: str, database_url: str, *, metrics_port: int = 0,
                    **settings_) -> Wire:
    settings = DiscordSettings(nats_url=nats_url, database_url=database_url, discord_token="fake-token",
                               discord_guild_id=GUILD_ID, metrics_port=metrics_port, **settings_)
    client = KernelBotClient(settings)
    await client.login("fake-token")  # runs setup_hook: layout, command sync, consumer, delivery
    client._connection.parse_guild_create(fake.guild_create_payload())  # what the gateway sends on connect
    return Wire(fake, client)


def old(minutes: float) -> datetime:
    return datetime.now(UTC) - timedelta(minutes=minutes)
