"""Pure rules of OAuth registration (docs/http-api.md "Registration"): the state parameter and who may register."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass

from schemas.credentials import cli_id_hash

PROVIDERS = ("discord", "github")
INVALID_PROVIDER = "Invalid provider, must be 'discord' or 'github'"
UNKNOWN_REGISTRATION = "Unknown or expired registration; run popcorn-cli register again"


class RegistrationRefused(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


@dataclass(frozen=True)
class State:
    cli_id: str
    is_reset: bool


def digest(cli_id: str) -> str:
    """How a pending cli id is stored: a leaked table names no usable id (the read model's hash)."""
    return cli_id_hash(cli_id)


def parse_state(raw: str) -> State:
    """The callback's `state`: base64url (padding optional) of {"cli_id": str, "is_reset": bool}."""
    try:
        text = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode()
        data = json.loads(text)
    except (binascii.Error, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise RegistrationRefused(400, "Invalid state parameter: not base64url-encoded JSON") from exc
    if not isinstance(data, dict):
        raise RegistrationRefused(400, "Invalid state parameter: not a JSON object")
    cli_id, is_reset = data.get("cli_id"), data.get("is_reset", False)
    if not isinstance(cli_id, str) or not cli_id:
        raise RegistrationRefused(400, "Invalid state parameter: cli_id must be a non-empty string")
    if not isinstance(is_reset, bool):
        raise RegistrationRefused(400, "Invalid state parameter: is_reset must be a boolean")
    return State(cli_id, is_reset)


@dataclass(frozen=True)
class Existing:
    """The user already holding the account's public id; provider None: provisioned by an operator."""

    provider: str | None


def check(provider: str, is_reset: bool, existing: Existing | None) -> None:
    """Register creates, reregister replaces; an id of another provider (or an operator's) is never taken over."""
    if existing is not None and existing.provider != provider:
        raise RegistrationRefused(409, "This account's user id is already taken by another identity provider")
    if not is_reset and existing is not None:
        raise RegistrationRefused(400, "This account is already registered. Please use the reregister command.")
    if is_reset and existing is None:
        raise RegistrationRefused(400, "No existing registration for this account; use register instead")
