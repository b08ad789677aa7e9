"""Which address the gateway's rate limits count a request against (services/gateway/ratelimit.py)."""

from __future__ import annotations

from starlette.requests import Request

from services.gateway.ratelimit import Limits
from services.gateway.settings import GatewaySettings


def request(peer: str, forwarded: str | None = None) -> Request:
    headers = [(b"x-forwarded-for", forwarded.encode())] if forwarded is not None else []
    return Request({"type": "http", "method": "GET", "path": "/auth/init", "headers": headers,
                    "client": (peer, 50000), "query_string": b""})


def test_without_trusted_proxies_the_peer_is_the_client_whatever_the_header_says():
    limits = Limits(GatewaySettings())
    assert limits.client_address(request("203.0.113.7", "198.51.100.1")) == "203.0.113.7"


def test_behind_a_trusted_proxy_the_last_untrusted_hop_is_the_client():
    limits = Limits(GatewaySettings(trusted_proxies=["10.0.0.0/8", "192.0.2.1"]))
    # the client wrote the first entry itself; the proxies appended what they saw
    assert limits.client_address(request("10.1.2.3", "1.1.1.1, 203.0.113.7, 192.0.2.1")) == "203.0.113.7"
    assert limits.client_address(request("10.1.2.3")) == "10.1.2.3"
    assert limits.client_address(request("10.1.2.3", "garbage")) == "garbage"  # counted on its own, never trusted
    # a peer that is no trusted proxy cannot name another client
    assert limits.client_address(request("203.0.113.9", "1.1.1.1")) == "203.0.113.9"
