"""The confirmation a registration needs when its callback comes from another address than its `/auth/init`.

popcorn-cli starts a registration and opens the provider's page in a browser on the same machine, so the callback
normally comes from the address that started it and binds at once. A callback from elsewhere may be a person
registering a CLI on another machine, or a victim who opened a link crafted by whoever started the registration:
the page says where and when it started and what it binds, and binds only after a POST from this page (its form
token, the single-use confirmation token and the state the callback carried).
"""

from __future__ import annotations

import logging
import secrets
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse

from services.gateway.accounts import auth_repository, confirm_repository, registering, registration
from services.gateway.accounts.oauth import Account
from services.gateway.accounts.registration import RegistrationRefused, State
from services.gateway.deps import Broker, Pool, Settings, state_of
from services.gateway.routes.pages import forged, page
from services.gateway.web import csrf
from services.gateway.web.session import open_session

router = APIRouter(include_in_schema=False)
log = logging.getLogger("kernelbot.gateway.auth")
PROVIDER_NAMES = {"discord": "Discord", "github": "GitHub"}


def client_address(request: Request) -> str:
    """The client (an IPv4 address or an IPv6 /64); behind a proxy, the one the proxy reports only if it is trusted
    (KB_TRUSTED_PROXIES). One answer for the registration check and the rate limits (services/gateway/edge/ratelimit.py)."""
    return state_of(request).limits.client(request)


def _shown(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


async def hold(request: Request, pool, provider: str, state: str, parsed: State, account: Account,
               started) -> HTMLResponse:
    """Keep the account the provider vouched for, and ask the person whether to bind it."""
    token = secrets.token_urlsafe(32)
    await confirm_repository.hold(pool, registration.digest(token), registration.digest(parsed.cli_id), provider,
                                  account.account_id, account.name, parsed.is_reset, started["expires_at"])
    return page(request, "confirm_registration.html", viewer=None, provider=PROVIDER_NAMES[provider],
                user_name=account.name, user_id=account.account_id, is_reset=parsed.is_reset,
                started_from=started["client_address"] or "an unknown address",
                started_at=_shown(started["created_at"]), here=client_address(request),
                expires=_shown(started["expires_at"]), token=token, state=state)


def _message(request: Request, status: int, heading: str, message: str) -> HTMLResponse:
    return page(request, "message.html", status, viewer=None, heading=heading, message=message)


@router.post("/auth/confirm")
async def confirm(request: Request, pool: Pool, broker: Broker, settings: Settings,
                  token: Annotated[str, Form()] = "", state: Annotated[str, Form()] = "",
                  action: Annotated[str, Form()] = "", csrf_token: Annotated[str, Form()] = ""):
    if not csrf.valid(request, csrf_token):
        return forged(request)
    try:
        parsed = registration.parse_state(state)
    except RegistrationRefused:
        parsed = None
    held = await confirm_repository.use(pool, registration.digest(token), registration.digest(parsed.cli_id)) \
        if parsed and token else None
    if held is None:
        return _message(request, 400, "Nothing to confirm", "This confirmation is unknown, expired or already "
                        "used. Run popcorn-cli register (or reregister) again.")
    provider = held["provider"]
    if action != "confirm":
        return _message(request, 200, "Cancelled", f"Nothing was linked: your {PROVIDER_NAMES[provider]} account "
                        "is unchanged, and the CLI id of that registration will never work.")
    # The account may have changed while the page was open (registered, moved): the same rules, checked again.
    row = await auth_repository.user(pool, held["user_id"])
    try:
        registration.check(provider, held["is_reset"], registration.Existing(row["provider"]) if row else None)
    except RegistrationRefused as refused:
        return _message(request, refused.status, "Not linked", refused.detail)
    account = Account(held["user_id"], held["user_name"])
    await registering.complete(request, broker, settings, provider, parsed.cli_id, held["is_reset"], account)
    moved = " Your previous CLI id no longer works." if held["is_reset"] else ""
    response = _message(request, 200, "Linked", f"The {PROVIDER_NAMES[provider]} account {account.name} is now "
                        f"linked to the CLI id of that registration; popcorn-cli can use it.{moved}")
    open_session(request, response, account.account_id, parsed.cli_id)
    return response
