"""`kernelbot submit` retries a gateway that is restarting (503) with the same Idempotency-Key, over real HTTP."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from services.cli import client


def test_a_restarting_gateway_is_asked_again_with_the_same_key(tmp_path, monkeypatch):
    monkeypatch.setattr(client.time, "sleep", lambda _: None)
    seen: list[str] = []

    class Gateway(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers["Content-Length"]))
            seen.append(self.headers["Idempotency-Key"])
            status, body = (503, {"detail": "Backend unavailable"}) if len(seen) < 3 else (
                202, {"status": "accepted", "details": {"id": 7, "job_status_id": 7}})
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    kernel = tmp_path / "k.py"
    kernel.write_text("def custom_kernel(data):\n    return data\n")
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        assert client.submit(url, "cli", kernel, "identity_py", "cpu", "test")["details"]["id"] == 7
        assert len(seen) == 3 and len(set(seen)) == 1 and len(seen[0]) == 32
        # a second submission is a new one: a new key
        client.submit(url, "cli", kernel, "identity_py", "cpu", "test")
        assert seen[3] != seen[0]
    finally:
        server.shutdown()
