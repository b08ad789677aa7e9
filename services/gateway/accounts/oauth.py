"""OAuth 2 authorization-code exchange with Discord and GitHub: the code for a token, the token for the account.

An adapter at the edge: the provider's endpoints come from settings, so tests point them at a local fake.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from services.core.rules.display_names import display_name
from services.gateway.settings import OAuthProvider

TIMEOUT_S = 10.0
# GitHub's REST API refuses requests without a User-Agent.
USER_AGENT = "kernelbot-gateway"


class ProviderRefused(Exception):
    """The provider turned the code or the token down, or answered something that is not an account."""


class ProviderUnreachable(Exception):
    """The provider did not answer (network error, timeout, 5xx)."""


@dataclass(frozen=True)
class Account:
    account_id: str
    name: str


def configured(config: OAuthProvider) -> bool:
    return bool(config.client_id and config.client_secret and config.client_secret.get_secret_value())


def _json(response: httpx.Response) -> dict:
    if response.status_code >= 500:
        raise ProviderUnreachable(f"{response.request.url.path} answered {response.status_code}")
    if response.status_code >= 400:
        raise ProviderRefused(f"{response.request.url.path} answered {response.status_code}")
    try:
        body = response.json()
    except ValueError as exc:
        raise ProviderRefused("the provider's answer is not JSON") from exc
    if not isinstance(body, dict):
        raise ProviderRefused("the provider's answer is not a JSON object")
    return body


async def _access_token(client: httpx.AsyncClient, config: OAuthProvider, code: str, redirect_uri: str) -> str:
    form = {
        "client_id": config.client_id, "client_secret": config.client_secret.get_secret_value(),
        "grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri,
    }
    body = _json(await client.post(config.token_url, data=form, headers={"Accept": "application/json"}))
    # GitHub reports a bad code as 200 {"error": "bad_verification_code", ...}
    token = body.get("access_token")
    if "error" in body or not isinstance(token, str) or not token:
        raise ProviderRefused(f"no access token: {body.get('error', 'missing')}")
    return token


def _account(provider: str, body: dict) -> Account:
    account_id, name = body.get("id"), display_name(provider, body)
    # Discord's ids are strings, GitHub's integers; the public user_id is always the string (docs/http-api.md "Data").
    if isinstance(account_id, bool) or not isinstance(account_id, (str, int)) or str(account_id) == "":
        raise ProviderRefused("the account has no id")
    if name is None or "\x00" in str(account_id):
        raise ProviderRefused("the account has no usable name")
    return Account(str(account_id), name)


async def identify(provider: str, config: OAuthProvider, code: str, redirect_uri: str) -> Account:
    """Exchange the authorization code and read the account it grants access to."""
    try:
        async with httpx.AsyncClient(timeout=TIMEOUT_S, headers={"User-Agent": USER_AGENT}) as client:
            token = await _access_token(client, config, code, redirect_uri)
            headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
            return _account(provider, _json(await client.get(config.user_url, headers=headers)))
    except httpx.HTTPError as exc:
        raise ProviderUnreachable(type(exc).__name__) from exc
