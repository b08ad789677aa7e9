"""Settings shared by every service. Built at start-up and passed down; never read at import time."""

from __future__ import annotations

from pydantic import BaseModel, SecretStr
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from services.kit.upstream_env import UpstreamNames

DEFAULT_NATS_URL = "nats://127.0.0.1:4222"
DEFAULT_DATABASE_URL = "postgresql://127.0.0.1:5432/kernelbot"


class ServiceSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="KB_", extra="ignore")

    nats_url: str = DEFAULT_NATS_URL
    database_url: str = DEFAULT_DATABASE_URL
    pool_size: int = 8
    log_level: str = "WARNING"
    # Port of the service's /metrics, /health and /ready server (consumer services; 0: none).
    metrics_port: int = 0

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource):
        # upstream KernelBot's names (DATABASE_URL, DISCORD_TOKEN, ...) as aliases of ours; both set: refused
        return init_settings, env_settings, UpstreamNames(settings_cls), dotenv_settings, file_secret_settings


class ScorerSettings(ServiceSettings):
    # Refuse to rank a score measured on hardware unlike the board's first scored one (KB_SAME_HARDWARE); the
    # difference is the comparable part of the fingerprint (services/scorer/fingerprints.py).
    same_hardware: bool = False


class OAuthProvider(BaseModel):
    """One OAuth 2 provider's endpoints and this deployment's client (env: a JSON object, e.g. KB_OAUTH_GITHUB)."""

    token_url: str
    user_url: str
    client_id: str = ""
    client_secret: SecretStr | None = None


class HfExportSettings(ServiceSettings):
    """The open data set on the Hugging Face Hub (services/core/hf_export.py)."""

    hf_token: SecretStr | None = None
    hf_private_dataset: str = ""  # owner/name of the data set exports go to by default
    hf_public_dataset: str = ""  # where finished public leaderboards may be published
    # The Hub's URL; empty: huggingface_hub's default, which honours HF_ENDPOINT.
    hf_endpoint: str = ""


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
    # Hours between scheduled exports of every public leaderboard to the private data set (0: none).
    hf_export_every_h: float = 0.0


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
    # The gateway's URL as runners reach it: payloads too large for a GitHub input or a Buildkite variable are
    # handed over as a single-use link below it (services/dispatcher/backends/carry.py). Empty: inline only.
    payload_url: str = ""
    # How long such a link lives: longer than a job may wait in its backend's queue.
    payload_link_ttl_s: float = 7200.0


class DiscordSettings(HfExportSettings):
    discord_token: SecretStr | None = None
    discord_guild_id: int = 0
    # Where the bot reads problem directories for /admin create-dev-leaderboard and update-problems.
    problems_dir: str = ""
    problems_archive_url: str = GatewaySettings.model_fields["problems_archive_url"].default
