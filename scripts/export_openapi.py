#!/usr/bin/env python
"""Export the gateway's OpenAPI document to docs/openapi.json.

The document comes from the gateway's own `create_app()`, built without connecting to NATS or Postgres, with pinned
settings so the output does not depend on who runs it; keys sorted, indent 2, trailing newline. The running gateway
serves the same document at /openapi.json (tests/gateway/test_openapi.py compares them).

    .venv/bin/python scripts/export_openapi.py           # rewrite
    .venv/bin/python scripts/export_openapi.py --check   # exit 1 if the document is out of date
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCUMENT = ROOT / "docs" / "openapi.json"

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from services.gateway.app import create_app  # noqa: E402 - once the checkout is on sys.path
from services.gateway.settings import GatewaySettings  # noqa: E402 - once the checkout is on sys.path
from services.kit import settings as kit  # noqa: E402 - once the checkout is on sys.path


def specification() -> dict[str, Any]:
    settings = GatewaySettings(nats_url=kit.DEFAULT_NATS_URL, database_url=kit.DEFAULT_DATABASE_URL)
    return create_app(settings).openapi()


def render(document: dict[str, Any] | None = None) -> str:
    return json.dumps(specification() if document is None else document, indent=2, sort_keys=True,
                      ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if the document is out of date")
    args = parser.parse_args(argv)
    text = render()
    if DOCUMENT.exists() and DOCUMENT.read_text(encoding="utf-8") == text:
        return 0
    if args.check:
        print(f"outdated: {DOCUMENT.relative_to(ROOT)}")
        return 1
    DOCUMENT.parent.mkdir(parents=True, exist_ok=True)
    DOCUMENT.write_text(text, encoding="utf-8")
    print(f"wrote: {DOCUMENT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
