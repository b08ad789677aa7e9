"""The Discord bot's settings (env: KB_ and the field name, or upstream KernelBot's DISCORD_TOKEN ...), with
the open-data export's it shares with the gateway. Built at start-up and passed down."""

from __future__ import annotations

from pydantic import SecretStr

from services.core.settings import PROBLEMS_ARCHIVE_URL, HfExportSettings


class DiscordSettings(HfExportSettings):
    discord_token: SecretStr | None = None
    discord_guild_id: int = 0
    # Where the bot reads problem directories for /admin create-dev-leaderboard and update-problems.
    problems_dir: str = ""
    problems_archive_url: str = PROBLEMS_ARCHIVE_URL
    # A profile's thread links its artifacts on the gateway (docs/quickstart.md, "Profiling"): the gateway's public
    # address and the secret it signs links with (the same KB_PUBLIC_URL and KB_SESSION_SECRET); unset, no links.
    public_url: str = ""
    session_secret: SecretStr | None = None
    profile_link_ttl_s: float = 24 * 3600.0
