"""The gateway's limits (services/gateway/edge/ratelimit.py): which address a request counts against, stream slots."""

from __future__ import annotations

import pytest
from fastapi import HTTPException
from starlette.requests import Request

from services.gateway.edge.ratelimit import Limits, Streams
from services.gateway.settings import GatewaySettings


def request(peer: str, forwarded: str | None = None) -> Request:
    headers = [(b"x-forwarded-for", forwarded.encode())] if forwarded is not None else []
    return Request({"type": "http", "method": "GET", "path": "/auth/init", "headers": headers,
                    "client": (peer, 50000), "query_string": b""})


def test_without_trusted_proxies_the_peer_is_the_client_whatever_the_header_says():
    limits = Limits(GatewaySettings())
    assert limits.client_address(request("203.0.113.7", "198.51.100.1")) == "203.0.113.7"


def test_behind_a_trusted_proxy_the_last_untrusted_hop_is_the_client():
    limits = Limits(GatewaySettings(trusted_proxies="10.0.0.0/8, 192.0.2.1"))
    # the client wrote the first entry itself; the proxies appended what they saw
    assert limits.client_address(request("10.1.2.3", "1.1.1.1, 203.0.113.7, 192.0.2.1")) == "203.0.113.7"
    assert limits.client_address(request("10.1.2.3")) == "10.1.2.3"
    assert limits.client_address(request("10.1.2.3", "garbage")) == "garbage"  # counted on its own, never trusted
    # a peer that is no trusted proxy cannot name another client
    assert limits.client_address(request("203.0.113.9", "1.1.1.1")) == "203.0.113.9"


def test_a_stream_slot_is_given_back_once_however_often_its_release_runs():
    streams = Streams(per_user=2, total=3)
    first, _ = streams.take("a"), streams.take("a")
    with pytest.raises(HTTPException) as refused:
        streams.take("a")
    assert refused.value.status_code == 429 and refused.value.headers["Retry-After"].isdigit()
    streams.take("b")
    with pytest.raises(HTTPException):
        streams.take("c")  # the total is reached
    first()
    first()  # a second release (response ended, then the generator's cleanup) frees nothing more
    assert streams.open() == 2
    streams.take("c")
    with pytest.raises(HTTPException):
        streams.take("d")
