"""Browser sessions: a signed cookie naming the user and a digest of the CLI id it was opened with.

A person proves ownership once, by the OAuth callback or by entering their CLI id; the cookie then carries no secret
(only a digest), and stops working when the CLI id is replaced (reregister) or after MAX_AGE_S.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

from fastapi import Request, Response
from itsdangerous import BadData, TimestampSigner, URLSafeTimedSerializer

from schemas.credentials import cli_id_hash
from services.gateway.deps import state_of

COOKIE = "kb_session"
MAX_AGE_S = 7 * 24 * 3600
SALT = "kb-session"  # a key signing something else (another salt) cannot forge a session


@dataclass(frozen=True)
class Session:
    user_id: str
    cli_digest: str


def cli_digest(cli_id_sha256: str) -> str:
    """What a session carries of its CLI id: derived from the stored digest, so the read model can check it."""
    return hashlib.sha256(f"session:{cli_id_sha256}".encode()).hexdigest()


class _Stamper(TimestampSigner):
    """itsdangerous' timestamp signer with a clock the tests can set."""

    def __init__(self, *args, now: float | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._now = now

    def get_timestamp(self) -> int:
        return int(self._now if self._now is not None else time.time())


class Signer:
    """Session tokens: `{user, CLI id digest}` signed (HMAC-SHA256) and stamped with the time they were issued."""

    def __init__(self, key: bytes) -> None:
        self._key = key

    def _serializer(self, now: float | None) -> URLSafeTimedSerializer:
        return URLSafeTimedSerializer(self._key, salt=SALT, signer=_Stamper,
                                      signer_kwargs={"digest_method": hashlib.sha256, "now": now})

    def issue(self, user_id: str, cli_id: str, now: float | None = None) -> str:
        return self._serializer(now).dumps({"u": user_id, "c": cli_digest(cli_id_hash(cli_id))})

    def read(self, token: str, now: float | None = None) -> Session | None:
        """The session, or None when the token is forged, altered, older than MAX_AGE_S or from the future."""
        try:
            claims = self._serializer(now).loads(token, max_age=MAX_AGE_S)
        except BadData:
            return None
        if not isinstance(claims, dict) or not isinstance(claims.get("u"), str) or \
                not isinstance(claims.get("c"), str):
            return None
        return Session(claims["u"], claims["c"])


def secret_key(request: Request) -> bytes:
    """The key of sessions and form tokens (services/gateway/state.py, `web_key`)."""
    return state_of(request).web_key


def signer(request: Request) -> Signer:
    return Signer(secret_key(request))


def cookie_secure(request: Request) -> bool:
    settings = state_of(request).settings
    return settings.public_url.startswith("https://") or request.url.scheme == "https"


def open_session(request: Request, response: Response, user_id: str, cli_id: str) -> None:
    response.set_cookie(COOKIE, signer(request).issue(user_id, cli_id), max_age=MAX_AGE_S, path="/",
                        httponly=True, samesite="lax", secure=cookie_secure(request))


def close_session(response: Response) -> None:
    response.delete_cookie(COOKIE, path="/")
