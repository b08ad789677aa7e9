"""The HTTP side of the CLI: submitting, following a submission, reading a ranking."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import httpx


def default_url() -> str:
    return os.environ.get("KB_URL", "http://127.0.0.1:8000")


def default_data_dir() -> Path:
    return Path(os.environ.get("KB_DATA_DIR", Path.home() / ".kernelbot"))


def cli_id(explicit: str | None) -> str:
    if explicit:
        return explicit
    if os.environ.get("KB_CLI_ID"):
        return os.environ["KB_CLI_ID"]
    stored = default_data_dir() / "cli_id"
    if stored.exists():
        return stored.read_text().strip()
    raise SystemExit("No CLI id: pass --cli-id, set KB_CLI_ID, or start the platform with `kernelbot up` first.")


class ApiError(Exception):
    pass


def _check(response: httpx.Response) -> dict | list:
    if response.is_success:
        return response.json()
    try:
        detail = response.json().get("detail", response.text)
    except ValueError:
        detail = response.text
    raise ApiError(f"{response.status_code}: {detail}")


SUBMIT_ATTEMPTS = 4


def submit(url: str, ident: str, path: Path, leaderboard: str, gpu: str, mode: str) -> dict:
    """Submit once, however often the request is sent: a lost connection or a restarting gateway (503) is retried
    with the same Idempotency-Key, so the retry finds the first attempt's submission if it was recorded."""
    headers = {"X-Popcorn-Cli-Id": ident, "Idempotency-Key": uuid.uuid4().hex}
    content = path.read_bytes()
    with httpx.Client(base_url=url, timeout=60) as client:
        for attempt in range(1, SUBMIT_ATTEMPTS + 1):
            try:
                response = client.post(f"/submission/{leaderboard}/{gpu}/{mode}", headers=headers,
                                       files={"file": (path.name, content)})
            except httpx.TransportError as exc:
                if attempt == SUBMIT_ATTEMPTS:
                    raise ApiError(f"cannot reach {url}: {exc}") from exc
            else:
                if response.status_code != 503 or attempt == SUBMIT_ATTEMPTS:
                    return _check(response)
            time.sleep(0.5 * 2 ** (attempt - 1))
    raise AssertionError("unreachable")


def follow(url: str, ident: str, submission_id: int, on_change, poll_s: float = 0.5, limit_s: float = 3600) -> dict:
    """Poll the submission until it is done, calling on_change(view) whenever something new is visible."""
    seen = None
    deadline = time.monotonic() + limit_s
    with httpx.Client(base_url=url, timeout=30) as client:
        while True:
            view = _check(client.get(f"/user/submissions/{submission_id}", headers={"X-Popcorn-Cli-Id": ident}))
            marker = ((view.get("job") or {}).get("status"), len(view["runs"]), view["done"])
            if marker != seen:
                on_change(view)
                seen = marker
            if view["done"]:
                return view
            if time.monotonic() > deadline:
                raise ApiError(f"Timed out waiting for submission {submission_id}")
            time.sleep(poll_s)


def leaderboards(url: str) -> list[dict]:
    with httpx.Client(base_url=url, timeout=30) as client:
        return _check(client.get("/leaderboards"))


def ranking(url: str, leaderboard: str, gpu: str) -> list[dict]:
    with httpx.Client(base_url=url, timeout=30) as client:
        return _check(client.get(f"/submissions/{leaderboard}/{gpu}"))
