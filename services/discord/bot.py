"""The bot process: a discord.py client whose commands publish events, and a consumer whose events become messages.

Start-up (setup_hook, REST only): migrations, pool, broker and streams; the server layout; commands synced to the
guild; the durable consumer and the delivery of its outbox. Discord's gateway then only brings interactions in.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import asyncpg
import discord
from discord import app_commands
from faststream.nats import NatsBroker, NatsRouter

from schemas.streams import EVENTS
from services.core.infrastructure.position import LedgerPosition
from services.core.rules import artifact_links
from services.core.submission.rate import SubmitRate
from services.discord import projection
from services.discord.commands.table import register
from services.discord.delivery import Delivery, Layout
from services.discord.layout import ensure_layout
from services.discord.settings import DiscordSettings
from services.kit import metrics
from services.kit.bus import stop_broker
from services.kit.consumer import Kit, KitSlot
from services.kit.leader import await_redeliveries
from services.kit.runtime import ordered_batch_consumer, service_broker, start_kit, stop_kit

log = logging.getLogger("kernelbot.discord")

CONSUMER = "discord-updates"
# Short: a batch is only database work, and after a restart what the old process had fetched comes back this soon.
ACK_WAIT_S = 5.0


@dataclass
class BotContext:
    """What every command needs once the bot has started."""

    settings: DiscordSettings
    client: KernelBotClient
    pool: asyncpg.Pool | None = None
    broker: NatsBroker | None = None
    layout: Layout | None = None
    delivery: Delivery | None = None
    position: LedgerPosition | None = None  # the ledger's, for the commands' read-your-own-write waits
    submit_rate: SubmitRate | None = None


def _router(slot: KitSlot, on_applied) -> NatsRouter:
    router = NatsRouter()

    @router.subscriber("evt.>", **ordered_batch_consumer(CONSUMER, ack_wait_s=ACK_WAIT_S), title=CONSUMER,
                       description="Run, score and leaderboard events, turned into Discord messages.")
    async def updates(body: list) -> None:
        await slot().handle_batch(projection.apply_batch)
        on_applied()

    return router


class KernelBotClient(discord.Client):
    def __init__(self, settings: DiscordSettings, *, intents: discord.Intents | None = None) -> None:
        # Slash commands need no privileged intent: guilds is enough to learn roles and channels.
        super().__init__(intents=intents or discord.Intents(guilds=True))
        self.tree = app_commands.CommandTree(self)
        self.ctx = BotContext(settings=settings.for_the_bot(), client=self)  # the staging bot's, in debug mode
        self.slot: KitSlot[None] = KitSlot(None)
        self.kit: Kit | None = None
        self.observer: metrics.Observer | None = None

    @property
    def guild_object(self) -> discord.Object:
        return discord.Object(self.ctx.settings.discord_guild_id)

    async def setup_hook(self) -> None:
        settings = self.ctx.settings
        broker = service_broker(settings)
        broker.include_router(_router(self.slot, self._wake_delivery))
        self.kit = await start_kit(broker, settings)
        self.slot.fill(self.kit)
        self.ctx.pool, self.ctx.broker = self.kit.pool, broker
        self.ctx.submit_rate = SubmitRate(settings.submit_rate, settings.rate_limit_storage_url)
        self.ctx.position = LedgerPosition()
        await self.ctx.position.start(settings.database_url, self.kit.pool)
        self.ctx.layout = await ensure_layout(self, settings.discord_guild_id)
        register(self.tree, self.ctx)
        await self.tree.sync(guild=self.guild_object)
        self.ctx.delivery = Delivery(self, self.kit.pool, self.ctx.layout, profile_links(settings))
        self.ctx.delivery.start()
        # What a stopped predecessor had fetched and not acknowledged comes back before anything later: without
        # this wait a restarted bot applied a submission's end before the run ends the old process held.
        await await_redeliveries(broker.connection.jetstream(), EVENTS.name, CONSUMER, ACK_WAIT_S + 5)
        await broker.start()
        # Like every consumer service: /metrics, /health and /ready on KB_METRICS_PORT, and the consumer's lag.
        self.observer = metrics.observer(broker, self.kit, settings, "kernelbot discord")
        await self.observer.start()

    def _wake_delivery(self) -> None:
        if self.ctx.delivery is not None:
            self.ctx.delivery.wake.set()

    async def close(self) -> None:
        if self.observer is not None:
            await self.observer.stop()
            self.observer = None
        if self.ctx.delivery is not None:
            await self.ctx.delivery.stop()
        if self.ctx.position is not None:
            await self.ctx.position.stop()
        if self.ctx.broker is not None:
            await stop_broker(self.ctx.broker)
        if self.kit is not None:
            await stop_kit(self.kit)
            self.slot.fill(None)
            self.kit = None
        await super().close()


def profile_links(settings: DiscordSettings):
    """Signs profile artifact links as the gateway does, where the bot knows the gateway's address and secret."""
    if not (settings.public_url and settings.session_secret):
        return None
    key = settings.session_secret.get_secret_value().encode()
    return lambda submission_id, gpu, stage: artifact_links.link(settings.public_url, key, submission_id, gpu, stage,
                                                                 ttl_s=settings.profile_link_ttl_s)
