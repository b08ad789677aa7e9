"""Browser sessions: a signed cookie naming the user and a digest of the CLI id it was opened with.

A person proves ownership once, by the OAuth callback or by entering their CLI id; the cookie then carries no secret
(only a digest), and stops working when the CLI id is replaced (reregister) or after MAX_AGE_S.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass

from fastapi import Request, Response

from services.kit.settings import GatewaySettings

COOKIE = "kb_session"
MAX_AGE_S = 7 * 24 * 3600


@dataclass(frozen=True)
class Session:
    user_id: str
    cli_digest: str


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def cli_digest(cli_id: str) -> str:
    return hashlib.sha256(f"session:{cli_id}".encode()).hexdigest()


class Signer:
    def __init__(self, key: bytes) -> None:
        self._key = key

    def _mac(self, body: str) -> str:
        return _b64(hmac.new(self._key, body.encode(), hashlib.sha256).digest())

    def issue(self, user_id: str, cli_id: str, now: float | None = None) -> str:
        claims = {"u": user_id, "c": cli_digest(cli_id), "t": int(now if now is not None else time.time())}
        body = _b64(json.dumps(claims, separators=(",", ":")).encode())
        return f"{body}.{self._mac(body)}"

    def read(self, token: str, now: float | None = None) -> Session | None:
        body, _, mac = token.partition(".")
        if not body or not hmac.compare_digest(mac.encode(), self._mac(body).encode()):
            return None
        try:
            claims = json.loads(_unb64(body))
            issued, user_id, digest = int(claims["t"]), str(claims["u"]), str(claims["c"])
        except (ValueError, KeyError, TypeError):
            return None
        if not 0 <= (now if now is not None else time.time()) - issued <= MAX_AGE_S:
            return None
        return Session(user_id, digest)


def signer(request: Request) -> Signer:
    """The app's signer, made on first use: the configured secret, else a random key for this process."""
    state = request.app.state
    if getattr(state, "web_signer", None) is None:
        settings: GatewaySettings = state.settings
        secret = settings.session_secret.get_secret_value() if settings.session_secret else ""
        state.web_signer = Signer(secret.encode() if secret else secrets.token_bytes(32))
    return state.web_signer


def open_session(request: Request, response: Response, user_id: str, cli_id: str) -> None:
    settings: GatewaySettings = request.app.state.settings
    secure = settings.public_url.startswith("https://") or request.url.scheme == "https"
    response.set_cookie(COOKIE, signer(request).issue(user_id, cli_id), max_age=MAX_AGE_S, path="/",
                        httponly=True, samesite="lax", secure=secure)


def close_session(response: Response) -> None:
    response.delete_cookie(COOKIE, path="/")
