"""The compiled binary of a CUDA submission, kept on the host for the other runs of the same submission (its secret
run, a rerun): compiled once, run by each (docs/authoring.md allows compiling once per run; this goes one step
further, across the runs of one submission on one host).

The key is a hash of everything that goes into the compile: the nvcc version, the payload's sources and headers,
defines, include directories, flags and architecture. The seed is not an input of the compile, so a public and a
secret run of one submission share their binary. An entry is copied out of the run directory right after nvcc
ends, before any user code has run, into a directory only the runner's own (root) user can enter, so no run can
alter what a later run executes. Without the per-run uid (no root) user code runs as the runner's user and could
reach the cache, so it is not used then.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from schemas.contracts import CompileResult, RunPayload

KEEP_S = 3600  # runs of one submission follow each other within minutes
DEFAULT_DIRECTORY = Path(tempfile.gettempdir()) / "kernelbot-compile-cache"


def cache_key(payload: RunPayload, nvcc_version: str, supervisor: str | None = None) -> str:
    material = {"nvcc": nvcc_version, "sources": payload.sources, "headers": payload.headers,
                "defines": payload.defines, "include_dirs": payload.include_dirs,
                "compile_flags": payload.compile_flags, "arch": payload.arch, "supervisor": supervisor}
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


class CompileCache:
    def __init__(self, directory: Path = DEFAULT_DIRECTORY) -> None:
        self.directory = Path(directory)

    def _ready(self) -> bool:
        self.directory.mkdir(mode=0o700, exist_ok=True)
        info = self.directory.stat()
        return info.st_uid == os.geteuid() and not info.st_mode & 0o077  # ours alone, or not used at all

    def get(self, key: str, run_dir: Path, names: list[str]) -> CompileResult | None:
        """The cached compile record, with each named binary copied into `run_dir`; None when not cached (a
        supervised harness has two binaries, the worker and the supervisor: both or neither)."""
        entry = self.directory / key
        try:
            if not self._ready():
                return None
            record = CompileResult.model_validate_json((entry / "compile.json").read_text())
            for name in names:
                shutil.copyfile(entry / name, run_dir / name)
        except (OSError, ValueError):
            return None
        for name in names:
            os.chmod(run_dir / name, 0o555)
        return record

    def put(self, key: str, run_dir: Path, names: list[str], record: CompileResult) -> None:
        try:
            if not self._ready():
                return
            self._evict()
            staging = Path(tempfile.mkdtemp(dir=self.directory, prefix=".new-"))
            for name in names:
                shutil.copyfile(run_dir / name, staging / name)
            (staging / "compile.json").write_text(record.model_dump_json())
            os.replace(staging, self.directory / key)
        except OSError:
            shutil.rmtree(locals().get("staging", self.directory / ".none"), ignore_errors=True)

    def _evict(self) -> None:
        cutoff = time.time() - KEEP_S
        for entry in self.directory.iterdir():
            try:
                if entry.stat().st_mtime < cutoff:
                    shutil.rmtree(entry, ignore_errors=True)
            except OSError:
                pass
