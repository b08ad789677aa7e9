"""The platform's version: the one written in pyproject.toml, read from the installed package's metadata."""

from __future__ import annotations

from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path


@cache
def platform_version() -> str:
    try:
        return version("kernelbot")
    except PackageNotFoundError:  # a checkout on PYTHONPATH, not installed: the file the metadata comes from
        import tomllib  # only on this path

        pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
        return tomllib.loads(pyproject.read_text())["project"]["version"]
