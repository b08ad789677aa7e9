"""One profiled case as a zip: `profile.<i>-<case>/` holding the details (text and CSV), the tool's raw output and
`manifest.json` (the benchmark case, the capture options, the system, a configuration fingerprint and upstream
KernelBot's `config_sha256`).

The zip travels base64 inside the run's result to the dispatcher, which keeps it beside the run rather than in the
event (services/dispatcher/trace_store.py), and popcorn-cli reads it inline from the profile route's answer. One
case's zip may hold up to MAX_ZIP_BYTES: raw outputs the client does not need (rocprofv3's per-process CSVs) are
dropped first, each noted in the manifest; a zip still over the limit fails the case with TraceTooLarge, because a
report cut short or left out is an archive popcorn-cli refuses.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import zipfile
from typing import Any

MAX_ZIP_BYTES = 32 * 1024 * 1024
MANIFEST = "manifest.json"


def case_directory(index: int, case: dict[str, Any]) -> str:
    """`profile.0-batch-20-n-32` as popcorn-cli names the folder it extracts into."""
    parts = [f"{key}-{value}" for key, value in case.items()]
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(parts))[:120]
    return f"profile.{index}-{slug}" if slug else f"profile.{index}"


def fingerprint(configuration: dict[str, Any]) -> str:
    """sha256 of what decides the profile besides the submission: case, capture, tool, host and harness files."""
    text = json.dumps(configuration, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _zip(directory: str, files: dict[str, bytes], manifest: dict[str, Any]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(f"{directory}/{name}", data)
        archive.writestr(f"{directory}/{MANIFEST}", json.dumps(manifest, indent=2, sort_keys=True, default=str))
    return buffer.getvalue()


class TraceTooLarge(Exception):
    """A case's zip is over the limit even without its optional files."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"the capture's zip is {size / 2**20:.1f} MiB, over the {limit / 2**20:.0f} MiB one profiled "
                         f"case may carry: capture fewer kernels (--ncu-launch-count, --ncu-kernel-name) or one case "
                         f"(--benchmark-index)")
        self.size, self.limit = size, limit


def config_sha256(payload: dict[str, Any], capture_options: dict[str, Any]) -> str:
    """upstream KernelBot's `profile_metadata.config_sha256`: sha256 of the run's sources and cases and the capture
    options, as sorted JSON with Python's default separators."""
    fields = {key: payload.get(key) for key in ("lang", "main", "sources", "headers", "arch", "tests", "benchmarks")}
    return hashlib.sha256(json.dumps({**fields, "profile_options": capture_options},
                                     sort_keys=True).encode()).hexdigest()


def bundle(directory: str, files: dict[str, bytes], essential: tuple[str, ...], manifest: dict[str, Any],
           limit: int = MAX_ZIP_BYTES) -> str:
    """The base64 zip, within `limit`: files not named in `essential` are dropped, in order; raises
    TraceTooLarge when the essential ones alone are over it."""
    manifest = {**manifest, "files": sorted(files), "omitted": []}
    data = _zip(directory, files, manifest)
    for name in [name for name in files if name not in essential]:
        if len(data) <= limit:
            break
        files = {key: value for key, value in files.items() if key != name}
        manifest = {**manifest, "files": sorted(files), "omitted": [*manifest["omitted"], name]}
        data = _zip(directory, files, manifest)
    if len(data) > limit:
        raise TraceTooLarge(len(data), limit)
    return base64.b64encode(data).decode("ascii")
