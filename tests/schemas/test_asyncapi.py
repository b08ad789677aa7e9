"""The committed AsyncAPI documents (docs/asyncapi/<service>.json) match what the services declare today.

Each document is regenerated in memory from the service's `create_app()`, with every network connection refused,
so building an app must not touch NATS or Postgres.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import socket
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HINT = "run .venv/bin/python scripts/export_asyncapi.py"


def _load_script(name: str):
    spec = importlib.util.spec_from_file_location(f"kb_script_{name}", ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


exporter = _load_script("export_asyncapi")


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError(f"create_app() opened a network connection: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture(scope="module")
def rendered() -> dict[str, str]:
    return {}


def _render(service: str, cache: dict[str, str]) -> str:
    if service not in cache:
        cache[service] = exporter.render(service)
    return cache[service]


def test_every_service_is_exported() -> None:
    assert set(exporter.SERVICES) == {"gateway", "dispatcher", "scorer", "ledger"}
    stray = sorted(p.name for p in exporter.DOCS_DIR.glob("*.json") if p.stem not in exporter.SERVICES)
    assert not stray, f"documents of services that no longer exist: {stray}"


@pytest.mark.parametrize("service", exporter.SERVICES)
def test_committed_document_is_current(service: str, rendered: dict[str, str], no_network: None) -> None:
    path = exporter.document_path(service)
    actual = _render(service, rendered)
    if not path.exists():
        pytest.fail(f"{path.relative_to(ROOT)} is missing; {HINT}", pytrace=False)
    expected = path.read_text(encoding="utf-8")
    if actual != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                actual.splitlines(keepends=True),
                fromfile=f"committed {path.relative_to(ROOT)}",
                tofile=f"generated from services/{service}/app.py",
            )
        )
        pytest.fail(f"the AsyncAPI document of {service} is out of date; {HINT}\n{diff}", pytrace=False)


@pytest.mark.parametrize("service", exporter.SERVICES)
def test_document_is_deterministic_and_environment_free(
    service: str, rendered: dict[str, str], no_network: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _render(service, rendered)
    monkeypatch.setenv("KB_NATS_URL", "nats://somewhere-else.example:4333")
    monkeypatch.setenv("KB_DATABASE_URL", "postgresql://somewhere-else.example/kb")
    again = exporter.render(service)
    assert again == first
    doc = json.loads(first)
    assert doc["asyncapi"].startswith("3.")
    assert doc["info"]["title"] == f"kernelbot-{service}"
    assert first.endswith("}\n") and first == json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _addresses(service: str, rendered: dict[str, str], action: str) -> set[str]:
    doc = json.loads(_render(service, rendered))
    channels = doc["channels"]
    return {
        channels[op["channel"]["$ref"].rsplit("/", 1)[1]]["address"]
        for op in doc["operations"].values()
        if op["action"] == action
    }


def test_documents_show_the_subscriptions(rendered: dict[str, str], no_network: None) -> None:
    # Guards the exporter: a document without the channels the services consume documents nothing.
    assert "evt.submission.received" in _addresses("dispatcher", rendered, "receive")
    assert {"evt.submission.accepted", "evt.run.completed", "evt.run.failed"} <= _addresses(
        "scorer", rendered, "receive"
    )
    assert "evt.>" in _addresses("ledger", rendered, "receive")
