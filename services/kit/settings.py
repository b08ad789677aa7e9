"""The settings every service shares (ServiceSettings: NATS, Postgres, pool, logs, metrics port), which each
service's own settings class extends beside its service (services/<service>/settings.py; the open-data export's,
shared by the gateway and the bot, in services/core/settings.py). Built at start-up and passed down; never read at
import time."""

from __future__ import annotations

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
