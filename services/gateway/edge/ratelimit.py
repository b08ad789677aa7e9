"""HTTP rate limits of the gateway: per client on `/auth/init`, per user on every submit route, and a cap on open
SSE streams. Each refusal is a 429 with Retry-After in the API's one error shape.

A client is an IPv4 address or an IPv6 /64 (`client_network`): the same key for the rate and for the pending
registrations' cap, so that the addresses of one /64 count as one client for both.

Rates are counted by the `limits` library, in this process's memory unless `rate_limit_storage_url` names a storage
the replicas share (redis://, memcached://: those need their client package installed). Open streams are counted
here, per process: a stream lives as long as its connection to this replica.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import time
from collections import Counter
from collections.abc import Callable

from fastapi import HTTPException, Request
from fastapi.responses import StreamingResponse
from limits import RateLimitItem, parse_many
from limits.aio.strategies import SlidingWindowCounterRateLimiter
from limits.storage import storage_from_string
from starlette.types import Receive, Scope, Send

from services.gateway.settings import GatewaySettings
from services.kit import metrics

log = logging.getLogger("kernelbot.gateway.ratelimit")
STREAM_RETRY_AFTER_S = 30


def _refuse(limit: str, detail: str, retry_after_s: int) -> HTTPException:
    metrics.RATE_LIMITED.labels(limit).inc()
    return HTTPException(429, detail, {"Retry-After": str(max(1, retry_after_s))})


class Rate:
    """One limit (`10/minute`, or several: `10/minute;100/hour`) over keys of one kind."""

    def __init__(self, limiter: SlidingWindowCounterRateLimiter, spec: str, scope: str) -> None:
        self._limiter = limiter
        self._items: list[RateLimitItem] = parse_many(spec)
        self._scope = scope

    async def hit(self, key: str, what: str) -> None:
        """Count one request of `key`; raises the 429 once a window of `key` is full."""
        for item in self._items:
            try:
                allowed = await self._limiter.hit(item, self._scope, key)
                stats = None if allowed else await self._limiter.get_window_stats(item, self._scope, key)
            except Exception:  # noqa: BLE001 - a shared counter store that is away must not take the API down
                log.warning("rate-limit storage unavailable; %s not limited", self._scope, exc_info=True)
                return
            if stats is not None:
                wait = math.ceil(stats.reset_time - time.time())
                raise _refuse(self._scope, f"Too many requests: at most {item} {what}; try again later", wait)


class Streams:
    """Open SSE streams, per user and in all, in this process."""

    def __init__(self, per_user: int, total: int) -> None:
        self.per_user = per_user
        self.total = total
        self._open: Counter[str] = Counter()

    def take(self, user_id: str) -> Callable[[], None]:
        """Reserve a stream for `user_id` (raises the 429 when full); returns what gives it back, once."""
        if self._open[user_id] >= self.per_user:
            raise _refuse("streams-per-user", f"Too many open streams: at most {self.per_user} per user; wait for "
                          "one to finish, or follow a submission with popcorn-cli submissions show",
                          STREAM_RETRY_AFTER_S)
        if self._open.total() >= self.total:
            raise _refuse("streams-total", "Too many open streams on this server; try again later",
                          STREAM_RETRY_AFTER_S)
        self._open[user_id] += 1
        metrics.OPEN_STREAMS.inc()
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                metrics.OPEN_STREAMS.dec()
                self._open[user_id] -= 1
                if self._open[user_id] <= 0:
                    del self._open[user_id]

        return release

    def open(self) -> int:
        return self._open.total()


class Limits:
    """Everything the routes limit, built from the settings when the app is made (nothing connects until used)."""

    def __init__(self, settings: GatewaySettings) -> None:
        url = settings.rate_limit_storage_url
        limiter = SlidingWindowCounterRateLimiter(storage_from_string(url if url.startswith("async+") else
                                                                      f"async+{url}"))
        self.auth_init = Rate(limiter, settings.auth_init_rate, "auth-init")
        self.submit = Rate(limiter, settings.submit_rate, "submit")
        self.streams = Streams(settings.streams_per_user, settings.streams_total)
        self._proxies = trusted_networks(settings.trusted_proxies)
        self._untrusted_forwarding_seen = False

    def client(self, request: Request) -> str:
        """Who the request is from, as the limits and the registration check count clients: `client_network` of
        `client_address`."""
        return client_network(self.client_address(request))

    def unvouched_forwarding(self, request: Request) -> bool:
        """X-Forwarded-For from a peer KB_TRUSTED_PROXIES does not list: most likely a proxy nobody listed, behind
        which every client has the proxy's address. Logged loudly once per process; the caller then assumes the
        worst (routes/auth.py asks the person to confirm a registration rather than binding it at once)."""
        if "x-forwarded-for" not in request.headers:
            return False
        peer = request.client.host if request.client else "unknown"
        # uvicorn has already put a trusted proxy's client in the peer's place (cli/main.py): a peer named by the
        # header is that client, or one that names only itself
        if self._trusted(peer) or peer in _hops(request):
            return False
        if not self._untrusted_forwarding_seen:
            self._untrusted_forwarding_seen = True
            listed = "no KB_TRUSTED_PROXIES is set" if not self._proxies else "KB_TRUSTED_PROXIES does not list it"
            log.warning("X-Forwarded-For from %s ignored: %s. Behind a reverse proxy or ingress, list its addresses "
                        "there, or every client looks like the proxy: the rate limits become global and each "
                        "registration needs its person's confirmation (docs/security.md)", peer, listed)
        return True

    def client_address(self, request: Request) -> str:
        """The TCP peer; behind a trusted proxy, the last X-Forwarded-For hop no trusted proxy added."""
        peer = request.client.host if request.client else "unknown"
        if not self._trusted(peer):
            return peer
        hops = _hops(request)
        for hop in reversed(hops):
            if not self._trusted(hop):
                return hop
        return hops[0] if hops else peer

    def _trusted(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in network for network in self._proxies)


def _hops(request: Request) -> list[str]:
    return [hop.strip() for hop in request.headers.get("x-forwarded-for", "").split(",") if hop.strip()]


def client_network(host: str) -> str:
    """What counts as one client: an IPv4 address, or an IPv6 /64 (one LAN, where a machine's temporary addresses
    change and where a single client could otherwise take 2^64 addresses)."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        # not an address (an ASGI test client's name, a proxy's junk): kept, but never in a network's shape, so that
        # every stored client ending in /64 is one (client_site, accounts/auth_repository.py)
        return host.replace("/", "_")
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


def client_site(client: str) -> str | None:
    """The IPv6 /48 of a client that is a /64 (one site: a free tunnel broker hands out a /48, 65,536 /64s); None for
    an IPv4 client."""
    if not client.endswith("/64"):
        return None
    return str(ipaddress.ip_network(client).supernet(new_prefix=48))


def trusted_networks(setting: str) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """KB_TRUSTED_PROXIES: comma-separated addresses or networks, `*` for any."""
    entries = [entry.strip() for entry in setting.split(",") if entry.strip()]
    if "*" in entries:
        return [ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0")]
    return [ipaddress.ip_network(entry, strict=False) for entry in entries]


class ReleasingStream(StreamingResponse):
    """A streaming response that runs `release` however it ends: finished, cut off by the client, or never
    started (an async generator that never ran would skip its own `finally`)."""

    def __init__(self, content, release: Callable[[], None], **kwargs) -> None:
        super().__init__(content, **kwargs)
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()
