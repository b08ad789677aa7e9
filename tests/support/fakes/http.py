"""A small real HTTP server for fakes of remote APIs: a route table of (method, path regex) -> handler."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlencode, urlsplit


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    params: dict[str, str] = field(default_factory=dict)

    def json(self):
        return json.loads(self.body or b"null")


@dataclass
class Reply:
    status: int = 200
    body: object = None  # dict/list -> JSON, bytes -> raw
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Request], Reply]

DEFAULT_PER_PAGE, MAX_PER_PAGE = 30, 100  # GitHub's and Buildkite's


def page_of(items: list, request: Request, url: str) -> tuple[list, dict[str, str]]:
    """One page of `items` as GitHub and Buildkite serve a listing: `page` (from 1) and `per_page` (default 30, at
    most 100) from the query, and a `Link` header naming the next, previous, first and last pages, with the other
    query parameters kept (RFC 8288, as both APIs write it)."""
    per_page = min(max(int(request.query.get("per_page", DEFAULT_PER_PAGE)), 1), MAX_PER_PAGE)
    page = max(int(request.query.get("page", 1)), 1)
    last = max((len(items) + per_page - 1) // per_page, 1)

    def link(number: int) -> str:
        return f"{url}{request.path}?{urlencode({**request.query, 'per_page': per_page, 'page': number})}"

    pages = {"next": page + 1 if page < last else None, "last": last if page < last else None,
             "first": 1 if page > 1 else None, "prev": page - 1 if page > 1 else None}
    links = ", ".join(f'<{link(number)}>; rel="{rel}"' for rel, number in pages.items() if number is not None)
    return items[(page - 1) * per_page:page * per_page], ({"Link": links} if links else {})


class FakeServer:
    """Serves `self.routes` on 127.0.0.1 in a daemon thread; records every request as (method, path)."""

    def __init__(self) -> None:
        self.routes: list[tuple[str, re.Pattern, Handler]] = []
        self.requests: list[tuple[str, str]] = []
        self.lock = threading.RLock()
        fake = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                parts = urlsplit(self.path)
                request = Request(self.command, parts.path, dict(parse_qsl(parts.query)),
                                  {k.lower(): v for k, v in self.headers.items()}, body)
                reply = fake.dispatch(request)
                payload = reply.body if isinstance(reply.body, bytes) else (
                    b"" if reply.body is None else json.dumps(reply.body).encode())
                self.send_response(reply.status)
                headers = {"Content-Type": "application/json"} | reply.headers
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _serve

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def route(self, method: str, pattern: str, handler: Handler) -> None:
        self.routes.append((method, re.compile(f"^{pattern}$"), handler))

    def dispatch(self, request: Request) -> Reply:
        with self.lock:
            self.requests.append((request.method, request.path))
        for method, pattern, handler in self.routes:
            match = pattern.match(request.path)
            if method == request.method and match:
                request.params = match.groupdict()
                return handler(request)
        return Reply(404, {"message": f"Not Found: {request.method} {request.path}"})

    def start(self) -> FakeServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
