"""A stand-in for GitHub's branch archive download (codeload): `/<owner>/<repo>/<branch>.tar.gz` of one checkout,
404 for anything else, as a problem sync fetches it."""

from __future__ import annotations

import io
import tarfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


@contextmanager
def serve_archive(checkout: Path, repository: str = "gpu-mode/reference-kernels", branch: str = "main"
                  ) -> Iterator[str]:
    """Serves the checkout as `repository`'s `branch`; yields the archive URL template for KB_PROBLEMS_ARCHIVE_URL."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(checkout, arcname=f"{repository.split('/')[1]}-{branch}")
    body, served = buffer.getvalue(), f"/{repository}/{branch}.tar.gz"
    requested: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            requested.append(self.path)
            found = self.path == served
            self.send_response(200 if found else 404)
            self.send_header("Content-Length", str(len(body) if found else 0))
            self.end_headers()
            if found:
                self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}" + "/{repository}/{branch}.tar.gz"
    finally:
        server.shutdown()
        server.server_close()
