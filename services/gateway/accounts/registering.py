"""Completing an OAuth registration: the event that binds the account to the CLI id, waited for until projected."""

from __future__ import annotations

import logging

from fastapi import Request

from schemas.auth_events import OAuthUserRegistered
from schemas.credentials import cli_id_hash
from services.core.infrastructure import settle
from services.gateway.accounts.oauth import Account
from services.gateway.deps import state_of
from services.gateway.settings import GatewaySettings

log = logging.getLogger("kernelbot.gateway.auth")


async def complete(request: Request, broker, settings: GatewaySettings, provider: str, cli_id: str,
                   is_reset: bool, account: Account) -> dict:
    """Publish the registration; the answer popcorn-cli's browser is shown (docs/http-api.md "Registration")."""
    # The CLI uses its id right after this answer: wait (bounded) until the ledger has projected it.
    registered = OAuthUserRegistered(user_id=account.account_id, user_name=account.name,
                                     cli_id_sha256=cli_id_hash(cli_id), provider=provider, is_reset=is_reset)
    if not await settle.publish_and_settle(broker, registered, state_of(request).position,
                                           settings.projection_wait_s):
        log.warning("registration of %s not projected within %.1fs", account.account_id, settings.projection_wait_s)
    return {
        "status": "success", "message": f"Successfully authenticated via {provider} and linked CLI ID.",
        "user_id": account.account_id, "user_name": account.name, "is_reset": is_reset,
    }
