"""The Discord bot's settings (env: KB_ and the field name, or upstream KernelBot's DISCORD_TOKEN ...), with
the open-data export's it shares with the gateway. Built at start-up and passed down."""

from __future__ import annotations

from pydantic import SecretStr

from services.core.infrastructure.settings import PROBLEMS_ARCHIVE_URL, PROBLEMS_REPOSITORY, HfExportSettings
from services.core.submission.rate import DEFAULT_SUBMIT_RATE


class DiscordSettings(HfExportSettings):
    discord_token: SecretStr | None = None
    discord_guild_id: int = 0
    # The staging bot (`kernelbot serve discord --debug`, or KB_DISCORD_DEBUG): another application's token and
    # another server, so changes are tried beside the live bot (upstream's DISCORD_DEBUG_TOKEN and
    # DISCORD_DEBUG_CLUSTER_STAGING_ID).
    discord_debug: bool = False
    discord_debug_token: SecretStr | None = None
    discord_debug_guild_id: int = 0
    # Where the bot reads problem directories for /admin create-dev-leaderboard, create-local and verify-task.
    problems_dir: str = ""
    problems_archive_url: str = PROBLEMS_ARCHIVE_URL
    # A profile's thread links its artifacts on the gateway (docs/quickstart.md, "Profiling"): the gateway's public
    # address and the secret it signs links with (the same KB_PUBLIC_URL and KB_SESSION_SECRET); unset, no links.
    public_url: str = ""
    session_secret: SecretStr | None = None
    profile_link_ttl_s: float = 24 * 3600.0
    # What `/admin update-problems` syncs when it names no repository (upstream's PROBLEMS_REPO).
    problems_repository: str = PROBLEMS_REPOSITORY
    # Submissions per user, the gateway's KB_SUBMIT_RATE and KB_RATE_LIMIT_STORAGE_URL: counted here too, so the
    # bot is no way around the gateway's limit (one count for both when the storage is shared).
    submit_rate: str = DEFAULT_SUBMIT_RATE
    rate_limit_storage_url: str = "memory://"

    def for_the_bot(self) -> DiscordSettings:
        """The settings the bot runs with: in debug mode, the staging bot's token and server in place of the live
        one's (neither falls back to the other, so the staging bot never logs in as the live one)."""
        if not self.discord_debug:
            return self
        return self.model_copy(update={"discord_token": self.discord_debug_token,
                                       "discord_guild_id": self.discord_debug_guild_id})
