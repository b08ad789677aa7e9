"""The gateway's settings (env: KB_ and the field name), with the open-data export's it shares with the bot.
Built at start-up and passed down."""

from __future__ import annotations

from pydantic import BaseModel, SecretStr

from services.core.infrastructure.settings import PROBLEMS_ARCHIVE_URL, PROBLEMS_REPOSITORY, HfExportSettings
from services.core.submission.rate import DEFAULT_SUBMIT_RATE


class OAuthProvider(BaseModel):
    """One OAuth 2 provider's endpoints and this deployment's client (env: a JSON object, e.g. KB_OAUTH_GITHUB)."""

    token_url: str
    user_url: str
    client_id: str = ""
    client_secret: SecretStr | None = None


class GatewaySettings(HfExportSettings):
    host: str = "127.0.0.1"
    port: int = 8000
    admin_token: SecretStr | None = None
    # How long a submit waits for the read model to show the new submission before answering 202 anyway.
    projection_wait_s: float = 5.0
    # How long a poll of popcorn-cli's submit loop is held until its submission is done (docs/polling.md); 0: never.
    long_poll_s: float = 20.0
    # At most this many polls are held at once; beyond, polls are answered at once.
    long_poll_max_held: int = 1000
    # Problem sync (docs/authoring.md "Loading problems onto a server"): where a repository's branch archive is
    # downloaded from, and the directory `POST /admin/leaderboards` builds `<dir>-dev` boards from (empty: the bundled
    # problems).
    problems_archive_url: str = PROBLEMS_ARCHIVE_URL
    problems_repository: str = PROBLEMS_REPOSITORY  # synced when a request names no repository
    dev_problems_dir: str = ""
    # Where browsers reach this gateway; the OAuth redirect URI is built from it (empty: the request's own URL).
    public_url: str = ""
    oauth_discord: OAuthProvider = OAuthProvider(token_url="https://discord.com/api/oauth2/token",
                                                 user_url="https://discord.com/api/users/@me")
    oauth_github: OAuthProvider = OAuthProvider(token_url="https://github.com/login/oauth/access_token",
                                                user_url="https://api.github.com/user")
    registration_ttl_s: float = 600.0
    # Addresses (comma-separated IPs or CIDRs, `*` for any) of reverse proxies whose X-Forwarded-For names the
    # client. Empty: the header is ignored and the peer is the client; behind a proxy, every client then looks alike
    # and a registration's callback is never checked against where it started.
    trusted_proxies: str = ""
    # Signs web session cookies and profile download links; unset, a random key per process (sessions and links end
    # with it, replicas disagree).
    session_secret: SecretStr | None = None
    # How long a profile's download links stay valid (docs/quickstart.md, "Profiling").
    profile_link_ttl_s: float = 24 * 3600.0
    # HTTP rate limits, in the `limits` library's notation ("10/minute", several joined by ";"); a refusal is a 429
    # with Retry-After. /auth/init per client address; submissions per user, across every submit route.
    auth_init_rate: str = "10/minute"
    submit_rate: str = DEFAULT_SUBMIT_RATE  # the bot counts its submissions by the same setting
    # Open SSE streams (the streaming submit) of one user, and of everyone, on one gateway process.
    streams_per_user: int = 4
    streams_total: int = 500
    # Where rate-limit counters live: memory:// counts per process; redis://host:6379 or memcached://host:11211
    # (their client package installed) shares them between replicas.
    rate_limit_storage_url: str = "memory://"
    # Hours between scheduled exports of the active competitions to the private data set (0: none); the schedule
    # runs only with a token and a private data set configured (services/gateway/hf_schedule.py).
    hf_export_every_h: float = 6.0
