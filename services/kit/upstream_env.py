"""Upstream KernelBot's environment variable names, read as aliases of ours so operators' habits carry over.

A setting named both ways is refused rather than resolved: two values for one setting is a mistake that a
precedence rule would hide (docs/operations.md, "Configure").
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

PREFIX = "KB_"
# Our field -> upstream's name for it (gpu-mode/kernelbot, src/kernelbot/env.py).
ALIASES: dict[str, str] = {
    "database_url": "DATABASE_URL",
    "admin_token": "ADMIN_TOKEN",
    "discord_token": "DISCORD_TOKEN",
    "discord_guild_id": "DISCORD_CLUSTER_STAGING_ID",
    "github_token": "GITHUB_TOKEN",
    "github_token_backup": "GITHUB_TOKEN_BACKUP",
    "github_repository": "GITHUB_REPO",
    "dev_problems_dir": "PROBLEM_DEV_DIR",
    "problems_dir": "PROBLEM_DEV_DIR",
    "hf_token": "HF_TOKEN",
    "hf_private_dataset": "HF_PRIVATE_DATASET",
    "hf_public_dataset": "HF_PUBLIC_DATASET",
    "discord_debug_token": "DISCORD_DEBUG_TOKEN",
    "discord_debug_guild_id": "DISCORD_DEBUG_CLUSTER_STAGING_ID",
    "github_ref": "GITHUB_WORKFLOW_BRANCH",
    "problems_repository": "PROBLEMS_REPO",
    "disable_ssl": "DISABLE_SSL",
}
# Upstream reads some names by their presence only: DISABLE_SSL set to anything but the empty string disables SSL.
PRESENCE_FLAGS = frozenset({"DISABLE_SSL"})


def _as_is(value: str) -> str:
    return value


def _https(domain: str) -> str:
    # Heroku's dyno metadata names the app's domain without a scheme; upstream put `https://` before it.
    return domain if "://" in domain else "https://" + domain.rstrip("/")


# Our field -> upstream's names for it, in the order upstream tries them (it joins them with `or`, so an empty one
# counts as unset), each with how its value becomes ours: the API's port (src/kernelbot/main.py), and the address
# its OAuth redirect URI starts with (src/kernelbot/api/main.py; HEROKU_APP_DEFAULT_DOMAIN_NAME from its earlier
# versions, where it came first and POPCORN_API_URL second).
FIRST_OF: dict[str, tuple[tuple[str, Callable[[str], str]], ...]] = {
    "port": (("PORT", _as_is),),
    "public_url": (("DISCORD_CLUSTER_MANAGER_API_BASE_URL", _as_is), ("HEROKU_APP_DEFAULT_DOMAIN_NAME", _https),
                   ("POPCORN_API_URL", _as_is)),
}
# Fields of one of our JSON-object settings -> upstream's separate variables for them.
NESTED_ALIASES: dict[str, dict[str, str]] = {
    "oauth_discord": {"client_id": "CLI_DISCORD_CLIENT_ID", "client_secret": "CLI_DISCORD_CLIENT_SECRET",
                      "token_url": "CLI_TOKEN_URL"},
    "oauth_github": {"client_id": "CLI_GITHUB_CLIENT_ID", "client_secret": "CLI_GITHUB_CLIENT_SECRET"},
}


class ConflictingSettings(ValueError):
    """A setting is given under our name and under upstream's name at once."""


def _lookup(environ: Mapping[str, str]) -> dict[str, str]:
    # pydantic-settings reads KB_ names case-insensitively; so does the conflict check
    return {name.upper(): value for name, value in environ.items()}


def upstream_values(fields: Mapping[str, FieldInfo], environ: Mapping[str, str], where: str = "") -> dict[str, Any]:
    """The values upstream's names give the `fields` of a settings class; ConflictingSettings when one of them is
    set under our name too (in the same place: `where` says which, the environment when empty)."""
    env = _lookup(environ)
    values: dict[str, Any] = {}
    for field, alias in ALIASES.items():
        if field in fields and alias in env:
            ours = PREFIX + field.upper()
            if ours in env:
                raise ConflictingSettings(
                    f"both {ours} and {alias} (upstream KernelBot's name for it) are set{where}; unset one of them")
            values[field] = ("true" if env[alias] else "false") if alias in PRESENCE_FLAGS else env[alias]
    for field, candidates in FIRST_OF.items():
        present = [(alias, convert) for alias, convert in candidates if field in fields and env.get(alias)]
        if not present:
            continue
        alias, convert = present[0]
        ours = PREFIX + field.upper()
        if ours in env:
            raise ConflictingSettings(
                f"both {ours} and {alias} (upstream KernelBot's name for it) are set{where}; unset one of them")
        values[field] = convert(env[alias])
    for field, parts in NESTED_ALIASES.items():
        given = {part: env[alias] for part, alias in parts.items() if field in fields and alias in env}
        if not given:
            continue
        ours = PREFIX + field.upper()
        if ours in env:
            names = ", ".join(parts[part] for part in given)
            raise ConflictingSettings(f"both {ours} and {names} (upstream KernelBot's names for its fields) are "
                                      f"set{where}; unset one of them")
        default = fields[field].default
        values[field] = {**(default.model_dump() if hasattr(default, "model_dump") else {}), **given}
    return values


def env_value(field: str, environ: Mapping[str, str] | None = None) -> str | None:
    """One setting straight from the environment, under our name or upstream's (ConflictingSettings for both), for
    code that reads the environment before any settings class (`kernelbot up`)."""
    env = _lookup(os.environ if environ is None else environ)
    ours, alias = PREFIX + field.upper(), ALIASES.get(field)
    if alias and ours in env and alias in env:
        raise ConflictingSettings(f"both {ours} and {alias} (upstream KernelBot's name for it) are set; unset one "
                                  "of them")
    return env.get(ours) or (env.get(alias) if alias else None)


# Every upstream name read as one of ours.
UPSTREAM_NAMES = frozenset(ALIASES.values()) | {name for parts in NESTED_ALIASES.values() for name in parts.values()} \
    | {name for names in FIRST_OF.values() for name, _ in names}


class UpstreamNames(PydanticBaseSettingsSource):
    """A settings source reading upstream's names, after our KB_ names (which never coexist with them in one place):
    the environment's, or a `.env` file's (`where` then names the file for the conflict message)."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str] | None = None,
                 where: str = "") -> None:
        super().__init__(settings_cls)
        self.environ = os.environ if environ is None else environ
        self.where = where

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:  # pragma: no cover
        raise NotImplementedError  # __call__ reads every field at once

    def __call__(self) -> dict[str, Any]:
        return upstream_values(self.settings_cls.model_fields, self.environ, self.where)
