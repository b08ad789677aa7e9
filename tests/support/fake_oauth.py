"""A local OAuth 2 provider speaking Discord's and GitHub's wire formats, for registration tests.

A real HTTP server on 127.0.0.1. The "browser" signs in as the account set with `sign_in`; the authorize endpoints
consent at once and redirect with a code. Codes are single-use, bound to the client and the redirect URI, and
expire; the token and user endpoints answer with the field names and error shapes of the real providers:
  Discord  GET /oauth2/authorize, POST /api/oauth2/token (form), GET /api/users/@me
  GitHub   GET /login/oauth/authorize, POST /login/oauth/access_token (form; errors are 200 + "error"), GET /user
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit

CODE_TTL_S = 600


def popcorn_state(cli_id: str, is_reset: bool) -> str:
    """The `state` popcorn-cli puts into the authorize URL: unpadded base64url of its JSON (the gateway reads it)."""
    payload = json.dumps({"cli_id": cli_id, "is_reset": is_reset}).encode()
    return base64.urlsafe_b64encode(payload).decode().rstrip("=")


@dataclass
class Grant:
    provider: str
    client_id: str
    redirect_uri: str
    account: dict
    issued: float


@dataclass
class FakeOAuth:
    clients: dict[str, tuple[str, str]]  # provider -> (client_id, client_secret)
    signed_in: dict[str, dict] = field(default_factory=dict)
    codes: dict[str, Grant] = field(default_factory=dict)
    tokens: dict[str, dict] = field(default_factory=dict)
    token_requests: list[dict] = field(default_factory=list)
    # provider -> HTTP status the token endpoint answers with instead of working (an outage, a refusal)
    token_failure: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""

    def sign_in(self, provider: str, account: dict) -> None:
        """The account the browser is signed in with at that provider (Discord: id str; GitHub: id int)."""
        self.signed_in[provider] = account

    def settings(self, provider: str) -> dict:
        """The gateway's KB_OAUTH_<PROVIDER> value for this fake."""
        client_id, secret = self.clients[provider]
        paths = {"discord": ("/api/oauth2/token", "/api/users/@me"), "github": ("/login/oauth/access_token", "/user")}
        token, user = paths[provider]
        return {"client_id": client_id, "client_secret": secret, "token_url": self.url + token,
                "user_url": self.url + user}

    def authorize_url(self, provider: str, redirect_uri: str, state: str) -> str:
        path = "/oauth2/authorize" if provider == "discord" else "/login/oauth/authorize"
        query = {"client_id": self.clients[provider][0], "redirect_uri": redirect_uri, "response_type": "code",
                 "scope": "identify" if provider == "discord" else "read:user", "state": state}
        return f"{self.url}{path}?{urlencode(query)}"

    # --- the provider's side --------------------------------------------------------------------------------

    def authorize(self, provider: str, query: dict) -> tuple[int, bytes, dict]:
        client_id, redirect_uri = query.get("client_id", ""), query.get("redirect_uri", "")
        if client_id != self.clients[provider][0] or not redirect_uri:
            return 400, b"invalid client_id or redirect_uri", {}
        code = secrets.token_urlsafe(16)
        with self.lock:
            self.codes[code] = Grant(provider, client_id, redirect_uri, self.signed_in[provider], time.time())
        target = f"{redirect_uri}?{urlencode({'code': code, 'state': query.get('state', '')})}"
        return 302, b"", {"Location": target}

    def exchange(self, provider: str, form: dict) -> tuple[int, dict]:
        self.token_requests.append({"provider": provider, **form})
        if provider in self.token_failure:
            return self.token_failure[provider], {"error": "server_error"}
        client_id, secret = self.clients[provider]
        # GitHub answers every OAuth error with 200 and an "error" field; Discord with a 4xx.
        refuse = (lambda error: (200, {"error": error})) if provider == "github" else (lambda error: (
            401 if error == "invalid_client" else 400, {"error": error}))
        if form.get("client_id") != client_id or form.get("client_secret") != secret:
            return refuse("incorrect_client_credentials" if provider == "github" else "invalid_client")
        if provider == "discord" and form.get("grant_type") != "authorization_code":
            return refuse("unsupported_grant_type")
        with self.lock:
            grant = self.codes.pop(form.get("code", ""), None)
        if grant is None or grant.provider != provider or time.time() - grant.issued > CODE_TTL_S:
            return refuse("bad_verification_code" if provider == "github" else "invalid_grant")
        if grant.redirect_uri != form.get("redirect_uri"):
            return refuse("redirect_uri_mismatch" if provider == "github" else "invalid_grant")
        token = secrets.token_urlsafe(24)
        with self.lock:
            self.tokens[token] = grant.account
        if provider == "github":
            return 200, {"access_token": token, "token_type": "bearer", "scope": "read:user"}
        return 200, {"access_token": token, "token_type": "Bearer", "expires_in": 604800,
                     "refresh_token": secrets.token_urlsafe(24), "scope": "identify"}

    def user(self, provider: str, authorization: str) -> tuple[int, dict]:
        scheme, _, token = authorization.partition(" ")
        account = self.tokens.get(token) if scheme.lower() in ("bearer", "token") else None
        if account is None:
            if provider == "github":
                return 401, {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"}
            return 401, {"message": "401: Unauthorized", "code": 0}
        return 200, account


def _handler(fake: FakeOAuth) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # quiet test output
            pass

        def _send(self, status: int, body: dict | bytes, headers: dict | None = None) -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json" if isinstance(body, dict) else "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            authorization = self.headers.get("Authorization", "")
            match parts.path:
                case "/oauth2/authorize":
                    self._send(*fake.authorize("discord", query))
                case "/login/oauth/authorize":
                    self._send(*fake.authorize("github", query))
                case "/api/users/@me":
                    self._send(*fake.user("discord", authorization))
                case "/user":
                    self._send(*fake.user("github", authorization))
                case _:
                    self._send(404, {"message": "Not Found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
            provider = {"/api/oauth2/token": "discord", "/login/oauth/access_token": "github"}.get(self.path)
            if provider is None:
                self._send(404, {"message": "Not Found"})
                return
            self._send(*fake.exchange(provider, form))

    return Handler


class FakeOAuthServer:
    """`with FakeOAuthServer() as fake:` serves until the block ends."""

    def __init__(self) -> None:
        self.fake = FakeOAuth(clients={"discord": ("discord-client", secrets.token_hex(8)),
                                       "github": ("github-client", secrets.token_hex(8))})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.fake))
        self.fake.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FakeOAuth:
        self._thread.start()
        return self.fake

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
