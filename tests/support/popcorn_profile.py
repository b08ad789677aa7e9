"""popcorn-cli's `submit --profile` on the wire, as its release sends and reads it (docs/quickstart.md, "Profiling").

The request is what reqwest's multipart writer produces for the CLI's form: the `file` part with the file name and
no content type, then one text part per capture option given, CRLF line ends, a `{16 hex}-{16 hex}-{16 hex}-{16 hex}`
boundary, and the CLI's identity header. The answer is read as the CLI reads it: the body split on blank lines,
`event:` and `data:` per message, `status` events logged, the first `result` or `error` ending it; then each
artifact fetched by its `url` with the same client and unzipped as the CLI extracts it.
"""

from __future__ import annotations

import io
import json
import secrets
import zipfile

import httpx

EXTRACTED = (".ncu-rep", "ncu-details.txt", "ncu-details.csv")  # what the CLI keeps of an artifact's zip


def boundary() -> str:
    return "-".join(secrets.token_hex(8) for _ in range(4))


def multipart_body(mark: str, file_name: str, content: bytes, fields: list[tuple[str, str]]) -> bytes:
    parts = [f'--{mark}\r\nContent-Disposition: form-data; name="file"; filename="{file_name}"\r\n\r\n'.encode()
             + content + b"\r\n"]
    for name, value in fields:
        parts.append(f'--{mark}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode())
    return b"".join(parts) + f"--{mark}--\r\n".encode()


def profile_request(cli_id: str, file_name: str, content: bytes, *, benchmark_index: int | None = None,
                    kernel_name: str | None = None, launch_count: int | None = None) -> tuple[dict, bytes]:
    """(headers, body) of the CLI's request; options left out are not sent at all."""
    mark = boundary()
    fields = [(name, str(value)) for name, value in (("benchmark_index", benchmark_index),
                                                      ("kernel_name", kernel_name), ("launch_count", launch_count))
              if value is not None]
    body = multipart_body(mark, file_name, content, fields)
    headers = {"X-Popcorn-Cli-Id": cli_id, "Content-Type": f"multipart/form-data; boundary={mark}",
               "Accept": "*/*", "Content-Length": str(len(body))}
    return headers, body


def read_stream(response: httpx.Response) -> tuple[list[str], str, dict]:
    """(status messages, final event name, its data) as the CLI's loop reads the SSE body."""
    assert response.headers["content-type"].startswith("text/event-stream"), response.headers
    buffer, statuses = "", []
    for chunk in response.iter_text():
        buffer += chunk
        while "\n\n" in buffer:
            message, buffer = buffer.split("\n\n", 1)
            event = data = None
            for line in message.splitlines():
                if line.startswith("event:"):
                    event = line.removeprefix("event:").strip()
                elif line.startswith("data:"):
                    data = line.removeprefix("data:").strip()
            if event == "status" and data is not None:
                statuses.append(json.loads(data).get("message", data))
            elif event in ("result", "error") and data is not None:
                return statuses, event, json.loads(data)
    raise AssertionError("Stream ended unexpectedly without a final result or error event.")


def extract(zip_bytes: bytes, kept: tuple[str, ...] = EXTRACTED) -> dict[str, bytes]:
    """The artifact's files the CLI keeps, by base name."""
    with zipfile.ZipFile(io.BytesIO(zip_bytes)) as archive:
        return {name.rsplit("/", 1)[-1]: archive.read(name) for name in archive.namelist() if name.endswith(kept)}
