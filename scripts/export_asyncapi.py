#!/usr/bin/env python
"""Export each service's AsyncAPI 3.0 document to docs/asyncapi/<service>.json.

The documents come from FastStream's specification of each service's broker, built by the service's own
`create_app()` without connecting to NATS or Postgres. Settings are pinned (not read from the environment) so that
the output does not depend on who runs it; keys are sorted, indent 2, trailing newline.

    .venv/bin/python scripts/export_asyncapi.py           # rewrite
    .venv/bin/python scripts/export_asyncapi.py --check   # exit 1 if a document is out of date
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCS_DIR = ROOT / "docs" / "asyncapi"
SERVICES = ("gateway", "dispatcher", "scorer", "ledger")

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from schemas.version import platform_version  # noqa: E402 - once the checkout is on sys.path
from services.cli.service_settings import settings_class  # noqa: E402 - once the checkout is on sys.path
from services.kit import settings as kit  # noqa: E402 - once the checkout is on sys.path


def _settings(service: str):
    cls = settings_class(service)
    # Explicit values win over KB_* variables: the documented server is the default one, wherever this runs.
    return cls(nats_url=kit.DEFAULT_NATS_URL, database_url=kit.DEFAULT_DATABASE_URL)


def specification(service: str) -> dict[str, Any]:
    """The AsyncAPI document of one service as plain JSON data."""
    from faststream.specification import AsyncAPI

    module = importlib.import_module(f"services.{service}.app")
    app = module.create_app(_settings(service))
    if service == "gateway":
        # A FastAPI app: document the broker it publishes through.
        factory = AsyncAPI(app.state.gateway.broker, title="kernelbot-gateway", version=platform_version())
    else:
        factory = app.schema
    return json.loads(factory.to_specification().to_json())


def render(service: str) -> str:
    return json.dumps(specification(service), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def document_path(service: str) -> Path:
    return DOCS_DIR / f"{service}.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a document is out of date")
    parser.add_argument("services", nargs="*", metavar="SERVICE",
                        help=f"services to export (default: all of {', '.join(SERVICES)})")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.services) - set(SERVICES))
    if unknown:
        parser.error(f"unknown service(s): {', '.join(unknown)}; choose from {', '.join(SERVICES)}")

    outdated = 0
    for service in args.services or SERVICES:
        path, text = document_path(service), render(service)
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        outdated += 1
        if args.check:
            print(f"outdated: {path.relative_to(ROOT)}")
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote: {path.relative_to(ROOT)}")
    return 1 if args.check and outdated else 0


if __name__ == "__main__":
    sys.exit(main())
