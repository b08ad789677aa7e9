"""Registration through OAuth (docs/http-api.md "Registration"): a pending cli id, then the provider's callback binds
it.

The callback binds at once only for the address that started the registration; from anywhere else the person is
asked first (routes/auth_confirm.py), so a link crafted by someone else cannot bind a victim's account to the
crafter's CLI id.
"""

from __future__ import annotations

import logging
import uuid

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import JSONResponse, Response

from services.gateway.accounts import auth_repository, oauth, registering, registration
from services.gateway.accounts.registration import INVALID_PROVIDER, RegistrationRefused
from services.gateway.deps import Broker, Pool, Settings, limit_auth_init, state_of
from services.gateway.edge.ratelimit import client_site
from services.gateway.routes import auth_confirm
from services.gateway.routes.auth_confirm import client_address, hold
from services.gateway.settings import GatewaySettings, OAuthProvider
from services.gateway.web.session import open_session

router = APIRouter()
router.include_router(auth_confirm.router)
log = logging.getLogger("kernelbot.gateway.auth")
# Unauthenticated callers create pending rows: past this many live ones, /auth/init asks them to come back later.
MAX_PENDING = 10_000
# ...and one address may hold only this many of them, so no single client fills the table for everyone...
MAX_PENDING_PER_CLIENT = 20
# ...nor one IPv6 site (a /48) with its 65,536 /64s: 100 sites to fill the table, not 500 /64s of one site.
MAX_PENDING_PER_SITE = 100
TOO_MANY_FROM_HERE = "Too many pending registrations from this address; finish one or wait ten minutes"
TOO_MANY_FROM_SITE = "Too many pending registrations from this network; finish one or wait ten minutes"


def _provider_config(settings: GatewaySettings, provider: str) -> OAuthProvider:
    return settings.oauth_discord if provider == "discord" else settings.oauth_github


def _redirect_uri(settings: GatewaySettings, request: Request, provider: str) -> str:
    base = settings.public_url.rstrip("/") or str(request.base_url).rstrip("/")
    return f"{base}/auth/cli/{provider}"


@router.get("/auth/init", dependencies=[Depends(limit_auth_init)])
async def auth_init(request: Request, pool: Pool, settings: Settings, provider: str | None = None) -> dict:
    if provider not in registration.PROVIDERS:
        raise HTTPException(400, INVALID_PROVIDER)
    address = client_address(request)
    if await auth_repository.pending_from(pool, address) >= MAX_PENDING_PER_CLIENT:
        raise HTTPException(429, TOO_MANY_FROM_HERE, {"Retry-After": "60"})
    site = client_site(address)
    if site is not None and await auth_repository.pending_in_site(pool, site) >= MAX_PENDING_PER_SITE:
        raise HTTPException(429, TOO_MANY_FROM_SITE, {"Retry-After": "60"})
    if await auth_repository.pending_count(pool) >= MAX_PENDING:
        raise HTTPException(429, "Too many pending registrations; try again in a minute", {"Retry-After": "60"})
    cli_id = str(uuid.uuid4())
    await auth_repository.start(pool, registration.digest(cli_id), provider, settings.registration_ttl_s, address)
    return {"state": cli_id}


async def _register(request: Request, pool, broker, settings: GatewaySettings, provider: str,
                    code: str | None, state: str | None) -> Response:
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
    started = await auth_repository.claim(pool, key, provider)
    if started is None:
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
    # Behind a proxy nobody listed, every client has the proxy's address: "the same address" proves nothing then.
    if started["client_address"] != client_address(request) or state_of(request).limits.unvouched_forwarding(request):
        return await hold(request, pool, provider, state, parsed, account, started)
    response = JSONResponse(await registering.complete(request, broker, settings, provider, parsed.cli_id,
                                                       parsed.is_reset, account))
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
