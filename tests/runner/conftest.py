"""Shared fixtures for the runner tests: small problem checkouts on disk and tiny harness payloads."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from schemas.contracts import RunPayload


@pytest.fixture
def problem_checkout(tmp_path: Path):
    """A factory writing `problems/set/<name>/task.yml` (from a dict or raw text) with its files; returns the dir."""
    root = tmp_path / "problems"
    (root / "set").mkdir(parents=True)
    (root / "set" / "eval.py").write_text("# shared harness\n")

    def write(task: dict | str, name: str = "prob", extra_files: dict[str, str] | None = None) -> Path:
        directory = root / "set" / name
        directory.mkdir(exist_ok=True)
        (directory / "reference.py").write_text("# reference\n")
        (directory / "template.py").write_text("# template\n")
        for file_name, content in (extra_files or {}).items():
            (directory / file_name).write_text(content)
        text = task if isinstance(task, str) else yaml.safe_dump(task, sort_keys=False)
        (directory / "task.yml").write_text(text)
        return directory

    return write


@pytest.fixture
def tiny_payload():
    """A factory for py payloads whose harness is a small script (no torch), for protocol-level tests."""

    def make(harness: str, *, submission: str = "def custom_kernel(data):\n    return data\n", **fields) -> RunPayload:
        sources = {"harness.py": textwrap.dedent(harness), "submission.py": textwrap.dedent(submission)}
        defaults = dict(run_id="run-1", gpu="cpu", lang="py", mode="test", main="harness.py", sources=sources,
                        tests=[{"size": 1, "seed": 1}], test_timeout=30)
        defaults.update(fields)
        return RunPayload(**defaults)

    return make
