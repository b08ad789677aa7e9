"""The settings every service shares (ServiceSettings: NATS, Postgres, pool, logs, metrics port), which each
service's own settings class extends beside its service (services/<service>/settings.py; the open-data export's,
shared by the gateway and the bot, in services/core/infrastructure/settings.py). Built at start-up and passed down;
never read at import time."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from dotenv import dotenv_values
from pydantic import model_validator
from pydantic_settings import BaseSettings, DotEnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from services.kit.upstream_env import ALIASES, UpstreamNames

DEFAULT_NATS_URL = "nats://127.0.0.1:4222"
DEFAULT_DATABASE_URL = "postgresql://127.0.0.1:5432/kernelbot"
# Read from the directory a service starts in, as upstream's README has organisers create it at the checkout's root
# and start there (upstream's load_dotenv finds the first one above its own source files).
DOTENV_FILE = Path(".env")


def without_ssl(url: str) -> str:
    """The database URL with `sslmode=disable`, replacing any sslmode it names."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "sslmode"]
    return urlunsplit(parts._replace(query=urlencode([*query, ("sslmode", "disable")])))


class ServiceSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="KB_", extra="ignore")

    nats_url: str = DEFAULT_NATS_URL
    database_url: str = DEFAULT_DATABASE_URL
    pool_size: int = 8
    log_level: str = "WARNING"
    # Port of the service's /metrics, /health and /ready server (consumer services; 0: none).
    metrics_port: int = 0
    # Connect to Postgres without SSL (`sslmode=disable` on the database URL), as upstream KernelBot's DISABLE_SSL;
    # otherwise the URL's own sslmode holds.
    disable_ssl: bool = False

    @model_validator(mode="after")
    def _ssl_disabled_in_url(self) -> ServiceSettings:
        if self.disable_ssl:
            self.database_url = without_ssl(self.database_url)
        return self

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource):
        # Upstream KernelBot's names (DATABASE_URL, DISCORD_TOKEN, ...) as aliases of ours, both set in one place:
        # refused. The environment first, then a `.env` file as upstream reads one (load_dotenv: the file never
        # overrides the environment), so a name in the file never clashes with one in the environment.
        file_values = dotenv_file_values(DOTENV_FILE)
        return (init_settings, env_settings, UpstreamNames(settings_cls),
                DotEnvSettingsSource(settings_cls, env_file=DOTENV_FILE, env_ignore_empty=True),
                UpstreamNames(settings_cls, file_values, where=f" in {DOTENV_FILE}"), file_secret_settings)


# The credentials a service refuses at start when weak: anyone who guesses one is an admin, or signs sessions.
GUARDED_SECRETS = ("admin_token", "session_secret")
MIN_SECRET_LENGTH = 16
# Values copied from examples and templates (ours and others'), compared without case, spaces, `-` or `_`.
PLACEHOLDERS = frozenset({"changeme", "changemeplease", "replaceme", "secret", "password", "admin", "token",
                          "adminsecret", "admintoken", "sessionsecret", "example", "placeholder", "todo", "xxx",
                          "test", "default", "letmein", "0000000000000000", "1234567890123456"})


class WeakSecret(ValueError):
    """An admin token or session secret that is a known placeholder or too short to be one nobody guesses."""


def _normalised(value: str) -> str:
    return "".join(ch for ch in value.lower() if ch not in " -_.")


def refuse_weak_secrets(settings: BaseSettings) -> None:
    """At start: each guarded setting the service has is unset (empty counts as unset) or a real secret; raises
    WeakSecret naming the setting otherwise. Not a validator on purpose: reading settings stays possible for the
    tools that only inspect them."""
    for name in GUARDED_SECRETS:
        if name not in type(settings).model_fields:
            continue
        held = getattr(settings, name)
        value = held.get_secret_value() if held is not None else ""
        if not value:
            continue
        setting = f"KB_{name.upper()}" + (f" (or {ALIASES[name]})" if name in ALIASES else "")
        normalised = _normalised(value)
        if normalised in PLACEHOLDERS or normalised.startswith(("changeme", "replaceme")) or len(set(value)) == 1:
            raise WeakSecret(f"{setting} is a placeholder value; set it to a random secret, e.g. "
                             "python -c 'import secrets; print(secrets.token_urlsafe(32))'")
        if len(value) < MIN_SECRET_LENGTH:
            raise WeakSecret(f"{setting} is {len(value)} characters long; it needs at least {MIN_SECRET_LENGTH} "
                             "(e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')")


def dotenv_file_values(path: Path) -> dict[str, str]:
    """The variables a `.env` file sets, in the current directory when `path` is relative; none without one.

    An empty value (`GITHUB_TOKEN=`, as upstream's README writes the optional ones) counts as unset: upstream reads
    each of them with a fallback, so the empty ones never set anything there either.
    """
    if not path.is_file():
        return {}
    return {name: value for name, value in dotenv_values(path).items() if value}
