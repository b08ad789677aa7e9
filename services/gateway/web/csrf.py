"""Tokens for the web pages' POST forms, so another site cannot submit them with a visitor's browser.

A random nonce lives in a cookie; each form carries an HMAC of it under the session key. Another site can make a
browser post a form, but cannot read this site's cookie or pages, so it cannot supply the matching token. The
nonce needs no session, which is what protects the sign-in form itself (a forged sign-in would put the visitor into
someone else's account).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

from fastapi import Request, Response

from services.gateway.web.session import cookie_secure, secret_key

COOKIE = "kb_csrf"
FIELD = "csrf_token"
_NONCE = re.compile(r"[A-Za-z0-9_-]{32,64}")


@dataclass(frozen=True)
class FormToken:
    token: str
    new_nonce: str | None  # set when the browser has no usable cookie yet: the response must carry it


def _mac(request: Request, nonce: str) -> str:
    return hmac.new(secret_key(request), f"csrf:{nonce}".encode(), hashlib.sha256).hexdigest()


def _nonce(request: Request) -> str | None:
    value = request.cookies.get(COOKIE, "")
    return value if _NONCE.fullmatch(value) else None


def issue(request: Request) -> FormToken:
    """The token for a form on the page being answered; the cookie's nonce is kept if the browser has one."""
    nonce = _nonce(request)
    if nonce is not None:
        return FormToken(_mac(request, nonce), None)
    nonce = secrets.token_urlsafe(32)
    return FormToken(_mac(request, nonce), nonce)


def attach(request: Request, response: Response, form: FormToken) -> None:
    if form.new_nonce is not None:
        response.set_cookie(COOKIE, form.new_nonce, path="/", httponly=True, samesite="lax",
                            secure=cookie_secure(request))


def valid(request: Request, submitted: str) -> bool:
    nonce = _nonce(request)
    return nonce is not None and bool(submitted) and hmac.compare_digest(submitted, _mac(request, nonce))
