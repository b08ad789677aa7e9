"""Discord's rate limits for the fake Discord: a 429 with Discord's body (`retry_after` in seconds, `global`) and
headers (`Retry-After`, `X-RateLimit-*`, `Via`), for the next requests of a route, as over a bucket."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from aiohttp import web


@dataclass
class RateLimits:
    limited: list[tuple[str, str, float]] = field(default_factory=list)  # (method, path, monotonic time) of each 429
    _rules: list[list] = field(default_factory=list)  # [method, path fragment, answers left, retry_after]

    def add(self, method: str, path_part: str, times: int = 1, retry_after: float = 0.5) -> None:
        """The next `times` requests of `method` whose path holds `path_part` are answered 429."""
        self._rules.append([method, path_part, times, retry_after])

    def answer(self, request: web.Request) -> web.Response | None:
        """The 429 for `request` if it is over a limit, else None."""
        for rule in self._rules:
            method, path_part, left, retry_after = rule
            if left > 0 and request.method == method and path_part in request.path:
                rule[2] -= 1
                self.limited.append((request.method, request.path, time.monotonic()))
                headers = {"Content-Type": "application/json", "Retry-After": str(max(1, round(retry_after))),
                           "X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "0",
                           "X-RateLimit-Reset-After": str(retry_after), "X-RateLimit-Bucket": "fake-bucket",
                           "X-RateLimit-Scope": "user",
                           # Discord's answers come through its proxy; discord.py takes a 429 without `Via` for a
                           # Cloudflare ban and does not wait and retry
                           "Via": "1.1 google"}
                body = {"message": "You are being rate limited.", "retry_after": retry_after, "global": False}
                return web.Response(body=json.dumps(body).encode(), status=429, headers=headers)
        return None
