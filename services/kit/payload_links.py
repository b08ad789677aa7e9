"""Links to run payloads held for a runner (migrations/0050_runner_payloads.sql): shared by the dispatcher, which
makes them, and the gateway, which serves each once.

A link is `<public gateway URL>/runner/payloads/<token>`: the token is 256 random bits, unguessable, so the link
itself is the credential (like a signed URL, without a key to share between services); only its SHA-256 is stored.
"""

from __future__ import annotations

import hashlib
import secrets

PATH = "/runner/payloads"


def new_token() -> str:
    return secrets.token_urlsafe(32)


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode("ascii", "replace")).digest()


def link(base_url: str, token: str) -> str:
    return f"{base_url.rstrip('/')}{PATH}/{token}"
