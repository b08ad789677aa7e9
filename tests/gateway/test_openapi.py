"""The committed OpenAPI document (docs/openapi.json) is what the running gateway serves."""

from __future__ import annotations

import difflib
import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HINT = "run .venv/bin/python scripts/export_openapi.py"


def _exporter():
    spec = importlib.util.spec_from_file_location("kb_script_export_openapi", ROOT / "scripts" / "export_openapi.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_served_document_is_the_committed_one(gateway):
    exporter = _exporter()
    served = exporter.render(gateway.http.get("/openapi.json").json())
    if not exporter.DOCUMENT.exists():
        pytest.fail(f"docs/openapi.json is missing; {HINT}", pytrace=False)
    committed = exporter.DOCUMENT.read_text(encoding="utf-8")
    if served != committed:
        diff = "".join(difflib.unified_diff(committed.splitlines(keepends=True), served.splitlines(keepends=True),
                                            fromfile="committed docs/openapi.json", tofile="served /openapi.json"))
        pytest.fail(f"the OpenAPI document is out of date; {HINT}\n{diff}", pytrace=False)
    assert json.loads(committed)["paths"]["/{leaderboard}/{gpu}/{mode}"]["post"]["responses"]["200"]["content"] == {
        "text/event-stream": {"schema": {"type": "string"}}}
