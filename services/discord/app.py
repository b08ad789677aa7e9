"""`kernelbot serve discord`: wiring only."""

from __future__ import annotations

import asyncio

from services.discord.bot import KernelBotClient
from services.discord.settings import DiscordSettings


def configured(settings: DiscordSettings) -> bool:
    settings = settings.for_the_bot()
    return settings.discord_token is not None and bool(settings.discord_token.get_secret_value()) \
        and bool(settings.discord_guild_id)


def enabled() -> bool:
    """Whether this environment configures a bot, for `kernelbot up`."""
    return configured(DiscordSettings())


def serve(settings: DiscordSettings | None = None) -> None:
    """Log in, connect to Discord's gateway, serve until stopped."""
    settings = settings or DiscordSettings()
    if settings.discord_debug and not configured(settings):
        raise SystemExit("The staging bot needs KB_DISCORD_DEBUG_TOKEN and KB_DISCORD_DEBUG_GUILD_ID (upstream's "
                         "names: DISCORD_DEBUG_TOKEN, DISCORD_DEBUG_CLUSTER_STAGING_ID; see docs/discord.md).")
    if not configured(settings):
        raise SystemExit("The Discord bot needs KB_DISCORD_TOKEN and KB_DISCORD_GUILD_ID (upstream's names: "
                         "DISCORD_TOKEN, DISCORD_CLUSTER_STAGING_ID; see docs/discord.md).")
    client = KernelBotClient(settings)
    token = client.ctx.settings.discord_token

    async def run() -> None:
        async with client:
            await client.start(token.get_secret_value())

    asyncio.run(run())
