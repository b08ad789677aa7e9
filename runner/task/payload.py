"""Building the run payload from a task and a submission (docs/authoring.md) and its transport encoding.

Transport: base64(zlib.compress(json_utf8)), standard alphabet with padding, default zlib level. A payload may
carry a secret seed, so whoever holds an encoded payload must treat it as a secret.
"""

from __future__ import annotations

import base64
import binascii
import json
import urllib.error
import urllib.request
import zlib

from pydantic import ValidationError

from runner.task.smoke import with_smoke_defaults
from schemas.contracts import SUBMISSION_MARKER, CuConfig, Mode, ProfileOptions, PyConfig, RunPayload, Task


class PayloadError(ValueError):
    """A payload that cannot be decoded or does not match the RunPayload contract."""


def build_payload(
    task: Task,
    code: str,
    *,
    run_id: str,
    gpu: str,
    mode: Mode,
    secret: bool,
    seed: int | None,
    arch: str | None = None,
    profile: ProfileOptions | None = None,
) -> RunPayload:
    """The payload for one run of `code` on one GPU.

    py: `main` plus every task file with the submission's file replaced by `code`. cu: the files named in
    `config.sources` are compiled (`sources`), all other files are only written (`headers`).
    """
    files = {name: (code if content == SUBMISSION_MARKER else content) for name, content in task.files.items()}
    common = dict(
        run_id=run_id,
        gpu=gpu,
        secret=secret,
        lang=task.lang,
        mode=mode,
        arch=arch,
        tests=task.tests,
        benchmarks=task.benchmarks,
        test_timeout=task.test_timeout,
        benchmark_timeout=task.benchmark_timeout,
        ranked_timeout=task.ranked_timeout,
        ranking_by=task.ranking_by,
        seed=seed,
        profile=profile,
        multi_gpu=task.multi_gpu,
        harness=task.harness,
        submission_file=task.submission_file,
    )
    if isinstance(task.config, PyConfig):
        return RunPayload(**common, main=task.config.main, sources=files)
    assert isinstance(task.config, CuConfig)
    compiled = set(task.config.sources)
    return RunPayload(
        **common,
        sources={name: text for name, text in files.items() if name in compiled},
        headers={name: text for name, text in files.items() if name not in compiled},
        defines=task.config.defines,
        include_dirs=task.config.include_dirs,
        compile_flags=task.config.compile_flags,
    )


def encode_payload(payload: RunPayload) -> str:
    """base64(zlib(json)) of the payload, as an ASCII string."""
    raw = json.dumps(payload.model_dump(mode="json"), ensure_ascii=False).encode("utf-8")
    return base64.b64encode(zlib.compress(raw)).decode("ascii")


REFERENCE_SCHEMES = ("https://", "http://")
FETCH_TIMEOUT_S = 120
MAX_FETCHED_BYTES = 32 * 1024 * 1024


def fetch_if_reference(text: str) -> str:
    """A payload passed by reference (a single-use link on the gateway, for payloads too large for the backend's
    field: services/dispatcher/backends/carry.py) fetched; any other text unchanged. The link is a credential,
    so an error names only where it points, never the token."""
    link = text.strip()
    if not link.startswith(REFERENCE_SCHEMES):
        return text
    where = link.rsplit("/", 1)[0] + "/..."
    try:
        with urllib.request.urlopen(link, timeout=FETCH_TIMEOUT_S) as response:  # noqa: S310 - http(s) only
            body = response.read(MAX_FETCHED_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise PayloadError(f"the payload link {where} answered {exc.code}: links are single-use and expire") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise PayloadError(f"cannot fetch the payload from {where}: {exc}") from exc
    if len(body) > MAX_FETCHED_BYTES:
        raise PayloadError(f"the payload at {where} is larger than {MAX_FETCHED_BYTES} bytes")
    return body.decode("utf-8", "replace")


def decode_payload_object(data: str | bytes) -> dict:
    """The raw JSON object of a payload given either as plain JSON or as its base64(zlib(json)) encoding; it may
    carry keys beyond the contract (a run's identity for the runner container)."""
    try:
        text = (data.decode("utf-8") if isinstance(data, bytes) else data).strip()
        if text.startswith("{"):
            obj = json.loads(text)
        else:
            # Whitespace is dropped first: some transports wrap long base64 values.
            compact = "".join(text.split())
            obj = json.loads(zlib.decompress(base64.b64decode(compact, validate=True)).decode("utf-8"))
    except (binascii.Error, zlib.error, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PayloadError(f"payload is neither JSON nor base64(zlib(json)): {exc}") from exc
    if not isinstance(obj, dict):
        raise PayloadError("payload is not a JSON object")
    return obj


def decode_payload(data: str | bytes) -> RunPayload:
    """Parse a payload given either as plain JSON or as its base64(zlib(json)) encoding."""
    return payload_from_object(decode_payload_object(data))


def payload_from_object(obj: dict) -> RunPayload:
    try:
        return RunPayload.model_validate(with_smoke_defaults(obj))
    except ValidationError as exc:
        raise PayloadError(f"payload does not match the RunPayload contract: {exc}") from exc
