"""One profiled case as a zip: `profile.<i>-<case>/` holding the details (text and CSV), the tool's raw output and
`manifest.json` (the benchmark case, the capture options, the system and a configuration fingerprint).

The zip travels base64 inside the run's result, through every backend and the event stream, so it is kept under
MAX_ZIP_BYTES: the raw output goes first, then the details are cut, each noted in the manifest.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import zipfile
from typing import Any

MAX_ZIP_BYTES = 3 * 1024 * 1024
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


def bundle(directory: str, files: dict[str, bytes], details: tuple[str, ...], manifest: dict[str, Any],
           limit: int = MAX_ZIP_BYTES) -> str:
    """The base64 zip, within `limit`: raw outputs dropped first, then the details cut to fit."""
    manifest = {**manifest, "files": sorted(files), "omitted": []}
    data = _zip(directory, files, manifest)
    for name in [name for name in files if name not in details]:
        if len(data) <= limit:
            break
        files = {key: value for key, value in files.items() if key != name}
        manifest = {**manifest, "files": sorted(files), "omitted": [*manifest["omitted"], name]}
        data = _zip(directory, files, manifest)
    budget = limit // max(1, len(details))
    while len(data) > limit and budget > 1024:
        files = {name: (value[:budget] + b"\n[cut to fit the answer]\n" if name in details else value)
                 for name, value in files.items()}
        manifest = {**manifest, "cut": sorted(name for name in details if name in files)}
        data = _zip(directory, files, manifest)
        budget //= 2
    return base64.b64encode(data).decode("ascii")
