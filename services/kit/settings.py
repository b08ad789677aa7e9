"""Settings shared by every service. Built at start-up and passed down; never read at import time."""

from __future__ import annotations

from pydantic import BaseModel, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_NATS_URL = "nats://127.0.0.1:4222"
DEFAULT_DATABASE_URL = "postgresql://127.0.0.1:5432/kernelbot"


class ServiceSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="KB_", extra="ignore")

    nats_url: str = DEFAULT_NATS_URL
    database_url: str = DEFAULT_DATABASE_URL
    # Deliveries of one message before it is judged poison and moved to the dead-letter stream.
    max_deliveries: int = 5
    # How long a delivered message may stay unacknowledged before JetStream redelivers it.
    ack_wait_s: float = 30.0
    pool_size: int = 8
    log_level: str = "WARNING"
    # Port of the service's /metrics, /health and /ready server (consumer services; 0: none).
    metrics_port: int = 0


class OAuthProvider(BaseModel):
    """One OAuth 2 provider's endpoints and this deployment's client (env: a JSON object, e.g. KB_OAUTH_GITHUB)."""

    token_url: str
    user_url: str
    client_id: str = ""
    client_secret: SecretStr | None = None


class GatewaySettings(ServiceSettings):
    host: str = "127.0.0.1"
    port: int = 8000
    admin_token: SecretStr | None = None
    # How long a submit waits for the read model to show the new submission before answering 202 anyway.
    projection_wait_s: float = 5.0
    # How long a poll of popcorn-cli's submit loop is held until its submission is done (docs/polling.md); 0: never.
    long_poll_s: float = 20.0
    # At most this many polls are held at once; beyond, polls are answered at once.
    long_poll_max_held: int = 1000
    # Problem sync (http-api.md §3.29, §3.22): where a repository's branch archive is downloaded from, and the
    # directory `POST /admin/leaderboards` builds `<dir>-dev` boards from (empty: the bundled problems).
    problems_archive_url: str = "https://codeload.github.com/{repository}/tar.gz/refs/heads/{branch}"
    dev_problems_dir: str = ""
    # Where browsers reach this gateway; the OAuth redirect URI is built from it (empty: the request's own URL).
    public_url: str = ""
    oauth_discord: OAuthProvider = OAuthProvider(token_url="https://discord.com/api/oauth2/token",
                                                 user_url="https://discord.com/api/users/@me")
    oauth_github: OAuthProvider = OAuthProvider(token_url="https://github.com/login/oauth/access_token",
                                                user_url="https://api.github.com/user")
    registration_ttl_s: float = 600.0
    # Signs web session cookies; unset, a random key per process (sessions end with it, replicas disagree).
    session_secret: SecretStr | None = None


class DispatcherSettings(ServiceSettings):
    # GPU name -> concurrent local runs. One job per GPU is the fair default.
    local_gpus: dict[str, int] = {"cpu": 1}
    # Catalogue names served by the in-process null backend (benchmarks of the platform itself).
    null_gpus: list[str] = []
    runs_dir: str = ""
    # Local runs fork their harness processes from a warm runner holding torch imported (runner/warm.py).
    warm_runner: bool = True
    launch_allowance_s: int = 60
    max_attempts: int = 3
    worker_id: str = ""
    # The GPU catalogue (services/dispatcher/catalogue.py): a YAML/JSON file path, or the JSON itself.
    gpu_catalogue: str = ""
    # How often remote jobs are polled, and the first delay before an infrastructure failure is retried.
    poll_interval_s: float = 5.0
    retry_backoff_s: float = 2.0
    # How long a dispatcher's claim on a run lasts without renewal: a dead replica's runs wait this long.
    lease_s: float = 30.0
    github_token: SecretStr | None = None
    buildkite_token: SecretStr | None = None
    slurm_token: SecretStr | None = None
    # "module:attr" naming a stand-in for modal's Function.from_name / FunctionCall.from_id (tests only).
    modal_client: str = ""


class DiscordSettings(ServiceSettings):
    discord_token: SecretStr | None = None
    discord_guild_id: int = 0
    # Where the bot reads problem directories for /admin create-dev-leaderboard and update-problems.
    problems_dir: str = ""
    problems_archive_url: str = GatewaySettings.model_fields["problems_archive_url"].default
