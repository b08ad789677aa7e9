"""Small rules of the house that keep a reader from being misled: one version string, one test file per name."""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from pathlib import Path

from schemas.version import platform_version

ROOT = Path(__file__).resolve().parents[2]
CODE = ("schemas", "services", "runner", "scripts")
VERSION_LITERAL = re.compile(r"""version\s*=\s*["']\d+\.\d+\.\d+["']""", re.IGNORECASE)


def test_the_version_is_written_once_in_pyproject_and_read_everywhere_else():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert platform_version() == declared
    written = [f"{path.relative_to(ROOT)}:{line}" for folder in CODE for path in (ROOT / folder).rglob("*.py")
               for line in path.read_text().splitlines() if VERSION_LITERAL.search(line)]
    assert not written, f"a version written in code instead of read from pyproject.toml: {written}"


def test_no_two_test_files_share_a_name():
    names = Counter(path.name for path in (ROOT / "tests").rglob("test_*.py"))
    assert not [name for name, count in names.items() if count > 1]
