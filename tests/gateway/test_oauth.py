"""Registration through OAuth (docs/http-api.md "Registration") against a local fake of Discord and GitHub.

A second gateway process, configured for the fake provider, joins the package's platform (its ledger projects the
registration); the "browser" follows the provider's redirect to the gateway's callback as a person's browser would.
"""

from __future__ import annotations

import base64
import itertools
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from schemas.credentials import cli_id_hash
from services.gateway.accounts import registration
from services.gateway.accounts.registration import Existing, RegistrationRefused
from services.gateway.web.session import Signer
from tests.gateway.conftest import CODE, cli
from tests.support.events import archived, query
from tests.support.fake_oauth import FakeOAuth, FakeOAuthServer, popcorn_state
from tests.support.oauth_platform import OAuthPlatform
from tests.support.platform import Platform

_accounts = itertools.count(91_000_000)


class OAuthGateway(OAuthPlatform):
    """Only a gateway, on the package platform's NATS and Postgres, with OAuth pointed at the fake."""

    def __init__(self, platform: Platform, fake: FakeOAuth, workdir: Path) -> None:
        super().__init__(platform.nats_url, platform.database_url, workdir, fake)


@pytest.fixture(scope="module")
def provider() -> Iterator[FakeOAuth]:
    with FakeOAuthServer() as fake:
        yield fake


@pytest.fixture(scope="module")
def oauth_gateway(gateway: Platform, provider: FakeOAuth, tmp_path_factory) -> Iterator[OAuthGateway]:
    running = OAuthGateway(gateway, provider, Path(tmp_path_factory.mktemp("oauth-gateway")))
    running.start("gateway")
    try:
        yield running
    finally:
        running.stop()


def account(provider_name: str, name: str) -> dict:
    """An account as the provider's user endpoint returns it (Discord ids are strings, GitHub's integers)."""
    number = next(_accounts)
    if provider_name == "discord":
        return {"id": str(number), "username": name, "discriminator": "0", "global_name": name.title(), "avatar": None}
    return {"login": name, "id": number, "node_id": "MDQ6VXNlcjE=", "type": "User", "site_admin": False}


def init(gw: Platform, provider_name: str) -> str:
    response = gw.http.get("/auth/init", params={"provider": provider_name})
    assert response.status_code == 200, response.text
    state = response.json()["state"]
    assert uuid.UUID(state).version == 4
    return state


def browser_login(gw: OAuthGateway, provider_name: str, cli_id: str, is_reset: bool = False,
                  browser: httpx.Client | None = None) -> httpx.Response:
    """What the person's browser does: open the authorize URL, consent, follow the redirect to the callback."""
    url = gw.fake.authorize_url(provider_name, f"{gw.url}/auth/cli/{provider_name}",
                                popcorn_state(cli_id, is_reset))
    if browser is not None:
        return browser.get(url)
    with httpx.Client(follow_redirects=True, timeout=30) as fresh:
        return fresh.get(url)


def signed_in_as(gw: Platform, browser: httpx.Client) -> str | None:
    """Whom the web pages take this browser for (its session cookie from the callback)."""
    page = browser.get(f"{gw.url}/web/submissions", follow_redirects=False)
    if page.status_code != 200:
        return None
    return page.text.split('id="viewer">', 1)[1].split("<", 1)[0]


def register(gw: OAuthGateway, provider_name: str, who: dict) -> tuple[str, httpx.Response]:
    gw.fake.sign_in(provider_name, who)
    cli_id = init(gw, provider_name)
    return cli_id, browser_login(gw, provider_name, cli_id)


def registered_ids(gw: Platform, account_id: str) -> list[dict]:
    return query(gw.database_url, "SELECT user_id, user_name, cli_id_sha256, provider FROM users WHERE user_id = $1",
                 account_id)


@pytest.mark.parametrize("provider_name", ["discord", "github"])
def test_registration_binds_the_cli_id_which_then_submits(gateway, oauth_gateway, provider_name):
    who = account(provider_name, f"{provider_name}-person")
    cli_id, response = register(oauth_gateway, provider_name, who)

    assert response.status_code == 200, response.text
    # the display name when the account has one (Discord's global_name), else the handle (this GitHub one has none)
    shown = "Discord-Person" if provider_name == "discord" else "github-person"
    assert response.json() == {
        "status": "success", "message": f"Successfully authenticated via {provider_name} and linked CLI ID.",
        "user_id": str(who["id"]), "user_name": shown, "is_reset": False,
    }
    assert "kb_session=" in response.headers["set-cookie"]
    # the code went to the token endpoint with the redirect URI the browser was sent to
    exchange = oauth_gateway.fake.token_requests[-1]
    assert exchange["redirect_uri"] == f"{oauth_gateway.url}/auth/cli/{provider_name}"
    assert exchange["grant_type"] == "authorization_code"
    # the registration is an event, and its projection makes the id work at once
    events = [e for e in archived(oauth_gateway.database_url, "OAuthUserRegistered") if e["user_id"] == str(who["id"])]
    assert [(e["provider"], e["cli_id_sha256"]) for e in events] == [(provider_name, cli_id_hash(cli_id))]
    # (through the platform's other gateway: every replica knows the id)
    accepted = gateway.submit(cli_id, "open", "null", "leaderboard", CODE)
    assert accepted.status_code == 202, accepted.text
    done = gateway.wait_done(cli_id, accepted.json()["details"]["id"], timeout=60)
    assert done["job"]["status"] == "succeeded" and done["user_id"] == str(who["id"])
    assert {"user_id": str(who["id"]), "user_name": shown}.items() <= next(
        r for r in gateway.ranking("open", "null") if r["user_id"] == str(who["id"])).items()


def test_a_state_is_single_use(oauth_gateway):
    who = account("discord", "once")
    cli_id, first = register(oauth_gateway, "discord", who)
    assert first.status_code == 200

    # the same state again, even with a fresh valid code from the provider, is spent
    replay = browser_login(oauth_gateway, "discord", cli_id)
    assert (replay.status_code, replay.json()) == (
        400, {"detail": "Unknown or expired registration; run popcorn-cli register again"})
    assert [r["cli_id_sha256"] for r in registered_ids(oauth_gateway, who["id"])] == [cli_id_hash(cli_id)]


def test_concurrent_callbacks_with_one_state_register_once(oauth_gateway):
    who = account("discord", "racer")
    oauth_gateway.fake.sign_in("discord", who)
    cli_id = init(oauth_gateway, "discord")
    url = oauth_gateway.fake.authorize_url("discord", f"{oauth_gateway.url}/auth/cli/discord",
                                           popcorn_state(cli_id, False))
    with httpx.Client(timeout=30) as browser:  # two consents, two valid codes, one state
        callbacks = [browser.get(url).headers["location"] for _ in range(2)]

    with ThreadPoolExecutor(2) as pool:
        statuses = list(pool.map(lambda callback: httpx.get(callback, timeout=30).status_code, callbacks))

    assert sorted(statuses) == [200, 400]
    assert [r["cli_id_sha256"] for r in registered_ids(oauth_gateway, who["id"])] == [cli_id_hash(cli_id)]


def test_unknown_expired_and_foreign_states_are_refused(oauth_gateway):
    oauth_gateway.fake.sign_in("github", account("github", "nobody"))
    unknown = browser_login(oauth_gateway, "github", str(uuid.uuid4()))
    assert (unknown.status_code, unknown.json()["detail"]) == (400, registration.UNKNOWN_REGISTRATION)

    expired = init(oauth_gateway, "github")
    lifetime = query(oauth_gateway.database_url, "SELECT expires_at - created_at AS ttl FROM oauth_registrations "
                     "WHERE cli_id_digest = $1", registration.digest(expired))
    assert lifetime[0]["ttl"].total_seconds() == 600
    query(oauth_gateway.database_url, "UPDATE oauth_registrations SET expires_at = now() - interval '1 second' "
          "WHERE cli_id_digest = $1", registration.digest(expired))
    late = browser_login(oauth_gateway, "github", expired)
    assert (late.status_code, late.json()["detail"]) == (400, registration.UNKNOWN_REGISTRATION)

    # a state begun for Discord does not complete at GitHub's callback
    for_discord = init(oauth_gateway, "discord")
    crossed = browser_login(oauth_gateway, "github", for_discord)
    assert (crossed.status_code, crossed.json()["detail"]) == (400, registration.UNKNOWN_REGISTRATION)
    for cli_id in (expired, for_discord):
        assert oauth_gateway.http.get("/user/submissions", headers=cli(cli_id)).status_code == 401


@pytest.mark.parametrize(("params", "detail"), [
    ({"code": "c"}, "Missing code or state parameter"),
    ({"state": "s"}, "Missing code or state parameter"),
    ({"code": "c", "state": "%%%"}, "Invalid state parameter: not base64url-encoded JSON"),
    ({"code": "c", "state": popcorn_state("", False)},
     "Invalid state parameter: cli_id must be a non-empty string"),
])
def test_malformed_callbacks_are_400(oauth_gateway, params, detail):
    response = oauth_gateway.http.get("/auth/cli/discord", params=params)
    assert (response.status_code, response.json()) == (400, {"detail": detail})


def test_invalid_provider_is_400(oauth_gateway):
    for path in ("/auth/init", "/auth/init?provider=gitlab", "/auth/cli/gitlab?code=c&state=s"):
        response = oauth_gateway.http.get(path)
        assert (response.status_code, response.json()) == (
            400, {"detail": "Invalid provider, must be 'discord' or 'github'"}), path


@pytest.mark.parametrize(("failure", "status", "detail"), [
    (500, 502, "Authentication with discord failed: the provider did not answer"),
    (400, 401, "Authentication with discord failed"),
])
def test_a_provider_failure_registers_nothing(oauth_gateway, failure, status, detail):
    who = account("discord", "unlucky")
    oauth_gateway.fake.token_failure["discord"] = failure
    try:
        cli_id, response = register(oauth_gateway, "discord", who)
    finally:
        del oauth_gateway.fake.token_failure["discord"]

    assert (response.status_code, response.json()) == (status, {"detail": detail})
    assert registered_ids(oauth_gateway, who["id"]) == []
    assert oauth_gateway.http.get("/user/submissions", headers=cli(cli_id)).status_code == 401


def test_a_code_the_provider_never_issued_is_401(oauth_gateway):
    cli_id = init(oauth_gateway, "github")
    state = popcorn_state(cli_id, False)
    response = oauth_gateway.http.get("/auth/cli/github", params={"code": "forged", "state": state})
    assert (response.status_code, response.json()) == (401, {"detail": "Authentication with github failed"})


def test_the_same_account_keeps_its_identity(oauth_gateway):
    who = account("github", "returning")
    oauth_gateway.fake.sign_in("github", who)
    first_cli = init(oauth_gateway, "github")
    browser = httpx.Client(follow_redirects=True, timeout=30)
    first = browser_login(oauth_gateway, "github", first_cli, browser=browser)
    assert first.status_code == 200
    # the browser that completed the flow is signed in to the web pages as that account
    assert signed_in_as(oauth_gateway, browser) == "returning"

    # `register` again: refused, the first id keeps working
    second_cli, again = register(oauth_gateway, "github", who)
    assert (again.status_code, again.json()["detail"]) == (
        400, "This account is already registered. Please use the reregister command.")
    assert oauth_gateway.http.get("/user/submissions", headers=cli(first_cli)).status_code == 200
    assert oauth_gateway.http.get("/user/submissions", headers=cli(second_cli)).status_code == 401

    # `reregister`: the same user, a new id; the old one stops working
    new_cli = init(oauth_gateway, "github")
    reset = browser_login(oauth_gateway, "github", new_cli, is_reset=True)
    assert reset.status_code == 200, reset.text
    assert (reset.json()["user_id"], reset.json()["is_reset"]) == (str(who["id"]), True)
    assert oauth_gateway.http.get("/user/submissions", headers=cli(new_cli)).status_code == 200
    assert oauth_gateway.http.get("/user/submissions", headers=cli(first_cli)).status_code == 401
    assert [(r["cli_id_sha256"], r["provider"]) for r in registered_ids(oauth_gateway, str(who["id"]))] == [
        (cli_id_hash(new_cli), "github")]
    # a web session ends with the id it was opened with
    assert signed_in_as(oauth_gateway, browser) is None
    browser.close()


def test_reregister_needs_an_existing_account(oauth_gateway):
    oauth_gateway.fake.sign_in("discord", account("discord", "newcomer"))
    response = browser_login(oauth_gateway, "discord", init(oauth_gateway, "discord"), is_reset=True)
    assert (response.status_code, response.json()["detail"]) == (
        400, "No existing registration for this account; use register instead")


def test_an_account_id_of_another_provider_is_409(oauth_gateway):
    github_user = account("github", "octo")
    _, first = register(oauth_gateway, "github", github_user)
    assert first.status_code == 200
    same_number = {"id": str(github_user["id"]), "username": "impostor", "discriminator": "0"}

    _, response = register(oauth_gateway, "discord", same_number)
    assert response.status_code == 409
    assert [r["user_name"] for r in registered_ids(oauth_gateway, str(github_user["id"]))] == ["octo"]


def test_unconfigured_provider_is_503(gateway):
    state = popcorn_state(init(gateway, "github"), False)
    response = gateway.http.get("/auth/cli/github", params={"code": "c", "state": state})
    assert (response.status_code, response.json()) == (503, {"detail": "OAuth for github is not configured"})


# --- pure rules -------------------------------------------------------------------------------------------------


def test_the_state_popcorn_cli_writes_is_read_with_or_without_padding():
    encoded = popcorn_state("abc", True)
    assert registration.parse_state(encoded) == registration.State("abc", True)
    assert registration.parse_state(encoded + "=" * (-len(encoded) % 4)).is_reset is True
    with pytest.raises(RegistrationRefused, match="is_reset must be a boolean"):
        registration.parse_state(base64.urlsafe_b64encode(b'{"cli_id": "abc", "is_reset": 1}').decode())
    with pytest.raises(RegistrationRefused, match="not a JSON object"):
        registration.parse_state(base64.urlsafe_b64encode(b'["abc"]').decode())


@pytest.mark.parametrize(("existing", "is_reset", "status"), [
    (None, False, None), (Existing("github"), True, None), (Existing("github"), False, 400),
    (None, True, 400), (Existing("discord"), True, 409), (Existing(None), False, 409),
])
def test_who_may_register(existing, is_reset, status):
    if status is None:
        registration.check("github", is_reset, existing)
        return
    with pytest.raises(RegistrationRefused) as refused:
        registration.check("github", is_reset, existing)
    assert refused.value.status == status


def test_session_cookies_are_signed_and_expire():
    signer = Signer(b"k" * 32)
    token = signer.issue("42", "cli", now=1000)
    assert signer.read(token, now=1001).user_id == "42"
    assert signer.read(token, now=1000 + 8 * 24 * 3600) is None
    assert Signer(b"x" * 32).read(token, now=1001) is None
    body, _, mac = token.rpartition(".")
    assert signer.read(body.replace(body[2], "A" if body[2] != "A" else "B") + "." + mac, now=1001) is None
    assert signer.read(token, now=999) is None  # issued in the future
    assert signer.read("", now=1001) is None and signer.read("not.a.token", now=1001) is None
