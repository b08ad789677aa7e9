"""A registration binds an account only for the client that started it.

popcorn-cli's `register` asks `/auth/init` for a CLI id and sends the person's browser to the provider with the id
in the OAuth `state`; the provider's redirect to `/auth/cli/{provider}` binds the account to that id. Whoever calls
`/auth/init` can craft that link themselves, with `is_reset: true`, and mail it: a victim who opens it would move
their own account to the crafter's CLI id. Attacker and victim here are two loopback addresses (127.0.0.2 and
127.0.0.1) talking to the real gateway over HTTP, and the provider is a local fake speaking GitHub's wire format.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from services.gateway.edge.ratelimit import client_network, trusted_networks
from tests.support.events import query
from tests.support.oauth_platform import OAuthPlatform, hidden_fields, oauth_platform

VICTIM, ATTACKER, ELSEWHERE = "127.0.0.1", "127.0.0.2", "127.0.0.3"
_accounts = itertools.count(93_000_000)
PENDING_PER_ADDRESS = 20  # docs/security.md


@pytest.fixture(scope="module")
def platform(postgres_server_url, _external_nats_url, tmp_path_factory) -> Iterator[OAuthPlatform]:
    with oauth_platform(postgres_server_url, _external_nats_url, Path(tmp_path_factory.mktemp("hijack"))) as running:
        yield running


def github_account(login: str) -> dict:
    return {"login": login, "id": next(_accounts), "node_id": "MDQ6VXNlcjE=", "type": "User", "site_admin": False}


def registered(platform: OAuthPlatform, address: str, login: str) -> tuple[dict, str]:
    """A person who ran `popcorn-cli register` on their own machine: the browser opens on the same address."""
    who = github_account(login)
    platform.fake.sign_in("github", who)
    with platform.client(address) as machine:
        cli_id = platform.init(machine)
        answer = machine.get(platform.authorize_link(cli_id, is_reset=False))
    assert answer.status_code == 200 and answer.json()["user_name"] == login, answer.text
    assert platform.works(cli_id)
    return who, cli_id


def test_a_crafted_reregister_link_does_not_move_the_victims_account(platform):
    victim, victim_cli = registered(platform, VICTIM, "victim")
    with platform.client(ATTACKER) as attacker:
        attacker_cli = platform.init(attacker)
    link = platform.authorize_link(attacker_cli, is_reset=True)

    # the victim, signed in at GitHub, opens the mailed link
    platform.fake.sign_in("github", victim)
    with platform.client(VICTIM) as browser:
        page = browser.get(link)
        assert not platform.works(attacker_cli), "the attacker's CLI id now acts as the victim"
        assert platform.works(victim_cli)
        # instead: a page that says what would happen, and where the registration came from
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "moves your GitHub account victim" in page.text and ATTACKER in page.text
        fields = hidden_fields(page.text)

        # the attacker knows the state (he made it), not the page's tokens: he cannot confirm it himself
        with platform.client(ATTACKER) as attacker:
            own = hidden_fields(attacker.get("/web/login").text)  # a valid form token of his own browser
            # (even the page's own fields would not do without the victim's cookie)
            for forged in ({"state": fields["state"], "action": "confirm", "csrf_token": own["csrf_token"]},
                           {**fields, "action": "confirm"}):
                assert attacker.post("/auth/confirm", data=forged).status_code in (400, 403)
        assert not platform.works(attacker_cli)

        # the victim cancels; the confirmation is spent
        cancelled = browser.post("/auth/confirm", data={**fields, "action": "cancel"})
        assert cancelled.status_code == 200 and "Nothing was linked" in cancelled.text
        assert browser.post("/auth/confirm", data={**fields, "action": "confirm"}).status_code == 400
    assert not platform.works(attacker_cli)
    assert platform.works(victim_cli)


def test_a_forwarded_for_header_does_not_make_the_attacker_look_like_the_victim(platform):
    # No proxy is configured: X-Forwarded-For is the client's word, and uvicorn would have believed it from
    # 127.0.0.1 by default. The attacker claims the victim's address when starting the registration.
    victim, victim_cli = registered(platform, ELSEWHERE, "victim-two")
    with platform.client(VICTIM) as attacker:
        attacker_cli = platform.init(attacker, headers={"X-Forwarded-For": ELSEWHERE})
    platform.fake.sign_in("github", victim)
    with platform.client(ELSEWHERE) as browser:
        page = browser.get(platform.authorize_link(attacker_cli, is_reset=True))
    assert not platform.works(attacker_cli)
    assert platform.works(victim_cli)
    assert page.headers["content-type"].startswith("text/html") and VICTIM in page.text


def test_a_new_account_is_not_bound_to_a_stranger_either(platform):
    # someone who has never registered opens a crafted `register` link: their account would be born the attacker's
    with platform.client(ATTACKER) as attacker:
        attacker_cli = platform.init(attacker)
    platform.fake.sign_in("github", github_account("newcomer"))
    with platform.client(VICTIM) as browser:
        page = browser.get(platform.authorize_link(attacker_cli, is_reset=False))
    assert page.headers["content-type"].startswith("text/html") and ATTACKER in page.text
    assert not platform.works(attacker_cli)


def test_from_the_same_address_a_registration_needs_no_extra_step(platform):
    who, first_cli = registered(platform, ELSEWHERE, "at-home")
    with platform.client(ELSEWHERE) as machine:
        new_cli = platform.init(machine)
        platform.fake.sign_in("github", who)
        moved = machine.get(platform.authorize_link(new_cli, is_reset=True))
    assert moved.status_code == 200 and moved.json()["is_reset"] is True
    assert platform.works(new_cli) and not platform.works(first_cli)


def test_from_another_address_a_registration_completes_once_confirmed(platform):
    # popcorn-cli on a server (127.0.0.2), the browser on a laptop (127.0.0.1): a real person's real case
    who, old_cli = registered(platform, ATTACKER, "two-machines")
    with platform.client(ATTACKER) as server:
        new_cli = platform.init(server)
    platform.fake.sign_in("github", who)
    with platform.client(VICTIM) as laptop:
        page = laptop.get(platform.authorize_link(new_cli, is_reset=True))
        fields = hidden_fields(page.text)
        assert not platform.works(new_cli)

        # a cross-site post of the confirm form (another site knows nothing of this page's form token) is refused
        with httpx.Client(base_url=platform.url, timeout=30) as other_site:
            forged = other_site.post("/auth/confirm", data={**fields, "csrf_token": "", "action": "confirm"},
                                     headers={"Origin": "https://evil.example"})
        assert forged.status_code == 403 and not platform.works(new_cli)

        confirmed = laptop.post("/auth/confirm", data={**fields, "action": "confirm"})
        assert confirmed.status_code == 200 and "is now linked" in confirmed.text, confirmed.text
        assert platform.works(new_cli) and not platform.works(old_cli)
        # the laptop that confirmed is signed in to the web pages as that account
        assert 'id="viewer">two-machines<' in laptop.get("/web/submissions").text
        # and the confirmation is single use
        assert laptop.post("/auth/confirm", data={**fields, "action": "confirm"}).status_code == 400


def test_one_address_cannot_fill_the_pending_registrations(platform):
    with platform.client("127.0.0.4") as flooder:
        for _ in range(PENDING_PER_ADDRESS):
            platform.init(flooder)
        refused = flooder.get("/auth/init", params={"provider": "github"})
    assert refused.status_code == 429 and "this address" in refused.json()["detail"]
    with platform.client("127.0.0.5") as someone_else:
        platform.init(someone_else)


PROXY, HOME, CAFE, INGRESS = "127.0.0.6", "198.51.100.7", "203.0.113.9", "127.0.0.8"


@pytest.fixture(scope="module")
def behind_proxy(platform, tmp_path_factory) -> Iterator[OAuthPlatform]:
    """A second gateway replica, told that 127.0.0.6 is its reverse proxy (KB_TRUSTED_PROXIES)."""
    replica = OAuthPlatform(platform.nats_url, platform.database_url, Path(tmp_path_factory.mktemp("proxied")),
                            platform.fake, {"KB_TRUSTED_PROXIES": PROXY})
    replica.start("gateway")
    try:
        yield replica
    finally:
        replica.stop()


def test_behind_a_trusted_proxy_the_forwarded_address_is_the_client(behind_proxy):
    who = github_account("proxied")
    behind_proxy.fake.sign_in("github", who)
    at = {"X-Forwarded-For": HOME}
    with behind_proxy.client(PROXY) as proxy:
        first = behind_proxy.init(proxy, headers=at)
        direct = proxy.get(behind_proxy.authorize_link(first, is_reset=False), headers=at)
        assert direct.status_code == 200 and direct.json()["user_name"] == "proxied"

        # the proxy reports another client for the callback: the person is asked
        second = behind_proxy.init(proxy, headers=at)
        asked = proxy.get(behind_proxy.authorize_link(second, is_reset=True), headers={"X-Forwarded-For": CAFE})
        assert asked.headers["content-type"].startswith("text/html") and HOME in asked.text
        assert not behind_proxy.works(second)

    # a client that is not the proxy speaks for itself only, whatever header it sends
    with behind_proxy.client(VICTIM) as direct_client:
        third = behind_proxy.init(direct_client, headers=at)
    with behind_proxy.client(PROXY) as proxy:
        asked = proxy.get(behind_proxy.authorize_link(third, is_reset=True), headers=at)
    assert asked.headers["content-type"].startswith("text/html") and VICTIM in asked.text
    assert behind_proxy.works(first) and not behind_proxy.works(third)


def test_behind_a_proxy_nobody_listed_a_callback_is_never_bound_at_once(platform):
    # An ingress that KB_TRUSTED_PROXIES does not name: every client has its address, and it says who the client
    # was in X-Forwarded-For. "Started from the same address" proves nothing then, so the person is asked.
    who = github_account("behind-an-ingress")
    with platform.client(INGRESS) as ingress:
        cli_id = platform.init(ingress, headers={"X-Forwarded-For": "198.51.100.20"})
        platform.fake.sign_in("github", who)
        page = ingress.get(platform.authorize_link(cli_id, is_reset=False),
                           headers={"X-Forwarded-For": "198.51.100.21"})
    assert page.headers["content-type"].startswith("text/html") and INGRESS in page.text
    assert not platform.works(cli_id)
    assert "no KB_TRUSTED_PROXIES is set" in platform.log("gateway")  # and the operator is told why


@pytest.fixture(scope="module")
def limited_behind_proxy(platform, tmp_path_factory) -> Iterator[OAuthPlatform]:
    """A replica behind the trusted proxy 127.0.0.6 with a rate of 5 registrations a minute per client."""
    replica = OAuthPlatform(platform.nats_url, platform.database_url, Path(tmp_path_factory.mktemp("limited")),
                            platform.fake, {"KB_TRUSTED_PROXIES": PROXY, "KB_AUTH_INIT_RATE": "5/minute"})
    replica.start("gateway")
    try:
        yield replica
    finally:
        replica.stop()


def _inits(proxy: httpx.Client, *clients: str) -> list[int]:
    return [proxy.get("/auth/init", params={"provider": "github"}, headers={"X-Forwarded-For": client}).status_code
            for client in clients]


def test_the_addresses_of_one_ipv6_64_are_one_client_for_the_rate_as_for_the_cap(limited_behind_proxy):
    # One /64 has 2^64 addresses: counted one by one, a single LAN (and one free /48 has 65,536 of them) would never
    # meet the rate, and 500 of its /64s would fill every pending registration there is.
    with limited_behind_proxy.client(PROXY) as proxy:
        one_lan = [f"2001:db8:7:1::{i:x}" for i in range(1, 8)]
        assert _inits(proxy, *one_lan) == [200] * 5 + [429] * 2
        refused = proxy.get("/auth/init", params={"provider": "github"}, headers={"X-Forwarded-For": one_lan[0]})
        assert refused.status_code == 429 and refused.json()["detail"].startswith("Too many requests")
        assert _inits(proxy, "2001:db8:7:2::1") == [200]  # the next /64: another client
        # IPv4: one address is one client, its neighbour another
        assert _inits(proxy, *["198.51.100.40"] * 6, "198.51.100.41") == [200] * 5 + [429, 200]
    pending = query(limited_behind_proxy.database_url, "SELECT client_address, count(*) AS n FROM oauth_registrations "
                    "WHERE client_address LIKE '2001:db8:7:%' GROUP BY 1 ORDER BY 1")
    assert [(row["client_address"], row["n"]) for row in pending] == [("2001:db8:7:1::/64", 5),
                                                                      ("2001:db8:7:2::/64", 1)]


def test_one_ipv6_site_cannot_fill_the_pending_registrations(limited_behind_proxy):
    # A /48 (what a free tunnel broker hands out) holds 65,536 /64s: each within its own limits, they would hold
    # every pending registration there is. The site as a whole holds at most 100.
    lans = [f"2001:db8:8:{lan:x}::1" for lan in range(1, 22)]
    with limited_behind_proxy.client(PROXY) as proxy:
        for lan in lans[:20]:
            assert _inits(proxy, *[lan] * 5) == [200] * 5
        refused = proxy.get("/auth/init", params={"provider": "github"}, headers={"X-Forwarded-For": lans[20]})
        assert refused.status_code == 429 and "from this network" in refused.json()["detail"], refused.text
        assert _inits(proxy, "2001:db8:9::1", "198.51.100.50") == [200, 200]  # another site, an IPv4 client


@pytest.mark.parametrize(("host", "client"), [
    ("203.0.113.9", "203.0.113.9"),
    ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
    ("2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"),  # the same LAN: one client
    ("::ffff:203.0.113.9", "203.0.113.9"),
    ("testclient", "testclient"),
    ("zz::/64", "zz::_64"),  # junk a proxy passed on never looks like a network
])
def test_an_ipv6_client_is_its_64_network(host, client):
    # so that one client cannot take one pending registration per address of its /64
    assert client_network(host) == client


def test_the_shipped_kubernetes_gateway_trusts_a_proxy_range_and_no_more():
    """deploy/k8s/gateway.yaml names the ingress's range: without it, behind any ingress, every client has one
    address. A range is the operator's to adjust, but never everything (`*`, /0) nor a whole private /8."""
    documents = yaml.safe_load_all((Path(__file__).resolve().parents[2] / "deploy/k8s/gateway.yaml").read_text())
    [gateway] = [d for d in documents if d and d["kind"] == "Deployment"]
    [container] = gateway["spec"]["template"]["spec"]["containers"]
    [entry] = [e for e in container["env"] if e["name"] == "KB_TRUSTED_PROXIES"]
    networks = trusted_networks(entry["value"])
    assert networks and all(network.is_private and network.prefixlen >= 12 for network in networks), networks
