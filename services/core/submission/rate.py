"""The per-user submit rate (KB_SUBMIT_RATE): one rule for every front end that submits, the bot's commands as the
gateway's routes (services/gateway/edge/ratelimit.py counts the HTTP ones, with the HTTP answer's Retry-After).

Counted by the `limits` library, under the same scope and key (`submit`, the user id) as the gateway's: in this
process's memory, or, with KB_RATE_LIMIT_STORAGE_URL naming a shared store, one count for a person however they
submit. Nothing connects until the first submission is counted.
"""

from __future__ import annotations

import logging
import math
import time

from limits import RateLimitItem, parse_many
from limits.aio.strategies import SlidingWindowCounterRateLimiter
from limits.storage import storage_from_string

from services.core.admission.refusal import refuse

log = logging.getLogger("kernelbot.submission.rate")
DEFAULT_SUBMIT_RATE = "30/minute"
SCOPE = "submit"


class SubmitRate:
    def __init__(self, spec: str, storage_url: str = "memory://") -> None:
        url = storage_url if storage_url.startswith("async+") else f"async+{storage_url}"
        self._limiter = SlidingWindowCounterRateLimiter(storage_from_string(url))
        self._items: list[RateLimitItem] = parse_many(spec)

    async def count(self, user_id: str) -> None:
        """Count one submission of `user_id`; refuses it (policy.Refused, 429) once a window is full."""
        for item in self._items:
            try:
                if await self._limiter.hit(item, SCOPE, user_id):
                    continue
                stats = await self._limiter.get_window_stats(item, SCOPE, user_id)
            except Exception:  # noqa: BLE001 - a shared counter store that is away must not stop submissions
                log.warning("rate-limit storage unavailable; submissions not limited", exc_info=True)
                return
            wait = max(1, math.ceil(stats.reset_time - time.time()))
            refuse(429, f"Too many requests: at most {item} submissions per user; try again in {wait} s", wait)
