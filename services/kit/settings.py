"""Settings shared by every service. Built at start-up and passed down; never read at import time."""

from __future__ import annotations

from pydantic import SecretStr
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


class GatewaySettings(ServiceSettings):
    host: str = "127.0.0.1"
    port: int = 8000
    admin_token: SecretStr | None = None
    # How long a submit waits for the read model to show the new submission before answering 202 anyway.
    projection_wait_s: float = 5.0


class DispatcherSettings(ServiceSettings):
    # GPU name -> concurrent local runs. One job per GPU is the fair default.
    local_gpus: dict[str, int] = {"cpu": 1}
    # Catalogue names served by the in-process null backend (benchmarks of the platform itself).
    null_gpus: list[str] = []
    runs_dir: str = ""
    launch_allowance_s: int = 60
    max_attempts: int = 3
    worker_id: str = ""
