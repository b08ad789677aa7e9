"""Download links of profile artifacts (docs/quickstart.md, "Profiling"): signed and expiring. Pure.

A link names one profiled stage of one submission on one GPU and when it expires, signed with the deployment's
session secret (KB_SESSION_SECRET), so the gateway and the Discord bot make the same links. The signature only
proves the gateway made the link; who may use it is decided when it is used: the submitter or an admin.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from urllib.parse import quote, urlencode

PATH = "/profile/artifacts"
DEFAULT_TTL_S = 24 * 3600


def _message(submission_id: int, gpu: str, stage: str, expires: int) -> bytes:
    return f"profile-artifact\n{submission_id}\n{gpu}\n{stage}\n{expires}".encode()


def signature(key: bytes, submission_id: int, gpu: str, stage: str, expires: int) -> str:
    return hmac.new(key, _message(submission_id, gpu, stage, expires), hashlib.sha256).hexdigest()


def link(base_url: str, key: bytes, submission_id: int, gpu: str, stage: str, *, ttl_s: float = DEFAULT_TTL_S,
         now: float | None = None) -> str:
    expires = int((time.time() if now is None else now) + ttl_s)
    query = urlencode({"expires": expires, "signature": signature(key, submission_id, gpu, stage, expires)})
    return f"{base_url.rstrip('/')}{PATH}/{submission_id}/{quote(gpu, safe='')}/{quote(stage, safe='')}?{query}"


def authentic(key: bytes, submission_id: int, gpu: str, stage: str, expires: int, given: str) -> bool:
    """The link was made with this deployment's key, unaltered."""
    # bytes: compare_digest refuses non-ASCII text, and a link's signature is whatever the client sent
    return hmac.compare_digest(signature(key, submission_id, gpu, stage, expires).encode(),
                               given.encode("utf-8", errors="replace"))


def expired(expires: int, now: float | None = None) -> bool:
    return expires < (time.time() if now is None else now)
