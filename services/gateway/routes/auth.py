"""Registration through OAuth (http-api.md §3.2, §3.3): a pending cli id, then the provider's callback binds it."""

from __future__ import annotations

import logging
import uuid

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse

from schemas.auth_events import OAuthUserRegistered
from services.core import settle
from services.core.credentials import cli_id_hash
from services.gateway import auth_repository, oauth, registration
from services.gateway.deps import Broker, Pool, Settings
from services.gateway.registration import INVALID_PROVIDER, RegistrationRefused
from services.gateway.settings import GatewaySettings, OAuthProvider
from services.gateway.web.session import open_session

router = APIRouter()
log = logging.getLogger("kernelbot.gateway.auth")
# Unauthenticated callers create pending rows: past this many live ones, /auth/init asks them to come back later.
MAX_PENDING = 10_000


def _provider_config(settings: GatewaySettings, provider: str) -> OAuthProvider:
    return settings.oauth_discord if provider == "discord" else settings.oauth_github


def _redirect_uri(settings: GatewaySettings, request: Request, provider: str) -> str:
    base = settings.public_url.rstrip("/") or str(request.base_url).rstrip("/")
    return f"{base}/auth/cli/{provider}"


@router.get("/auth/init")
async def auth_init(pool: Pool, settings: Settings, provider: str | None = None) -> dict:
    if provider not in registration.PROVIDERS:
        raise HTTPException(400, INVALID_PROVIDER)
    if await auth_repository.pending_count(pool) >= MAX_PENDING:
        raise HTTPException(429, "Too many pending registrations; try again in a minute", {"Retry-After": "60"})
    cli_id = str(uuid.uuid4())
    await auth_repository.start(pool, registration.digest(cli_id), provider, settings.registration_ttl_s)
    return {"state": cli_id}


async def _register(request: Request, pool, broker, settings: GatewaySettings, provider: str,
                    code: str | None, state: str | None) -> JSONResponse:
    if provider not in registration.PROVIDERS:
        raise RegistrationRefused(400, INVALID_PROVIDER)
    if not code or not state:
        raise RegistrationRefused(400, "Missing code or state parameter")
    parsed = registration.parse_state(state)
    key = registration.digest(parsed.cli_id)
    if not await auth_repository.pending(pool, key, provider):
        raise RegistrationRefused(400, registration.UNKNOWN_REGISTRATION)
    config = _provider_config(settings, provider)
    if not oauth.configured(config):
        raise RegistrationRefused(503, f"OAuth for {provider} is not configured")
    # Claimed before the provider is asked: a state is spent by its first use, whatever the outcome, and of
    # concurrent callbacks with one state only one gets past this line.
    if not await auth_repository.claim(pool, key, provider):
        raise RegistrationRefused(400, registration.UNKNOWN_REGISTRATION)
    try:
        account = await oauth.identify(provider, config, code, _redirect_uri(settings, request, provider))
    except oauth.ProviderRefused as exc:
        log.warning("%s refused a registration: %s", provider, exc)
        raise RegistrationRefused(401, f"Authentication with {provider} failed") from exc
    except oauth.ProviderUnreachable as exc:
        log.warning("%s unreachable during a registration: %s", provider, exc)
        raise RegistrationRefused(502, f"Authentication with {provider} failed: the provider did not answer") from exc
    row = await auth_repository.user(pool, account.account_id)
    registration.check(provider, parsed.is_reset, registration.Existing(row["provider"]) if row else None)
    # The CLI uses its id right after this answer: wait (bounded) until the ledger has projected it.
    registered = OAuthUserRegistered(user_id=account.account_id, user_name=account.name,
                                     cli_id_sha256=cli_id_hash(parsed.cli_id),
                                     provider=provider, is_reset=parsed.is_reset)
    if not await settle.publish_and_settle(broker, registered, request.app.state.position,
                                           settings.projection_wait_s):
        log.warning("registration of %s not projected within %.1fs", account.account_id, settings.projection_wait_s)
    response = JSONResponse({
        "status": "success", "message": f"Successfully authenticated via {provider} and linked CLI ID.",
        "user_id": account.account_id, "user_name": account.name, "is_reset": parsed.is_reset,
    })
    # The browser that completed the flow is the account owner's: it is signed in to the web pages too.
    open_session(request, response, account.account_id, parsed.cli_id)
    return response


@router.get("/auth/cli/{provider}")
async def auth_callback(provider: str, request: Request, pool: Pool, broker: Broker, settings: Settings,
                        code: str | None = None, state: str | None = None) -> dict:
    try:
        return await _register(request, pool, broker, settings, provider, code, state)
    except RegistrationRefused as refused:
        raise HTTPException(refused.status, refused.detail) from None
