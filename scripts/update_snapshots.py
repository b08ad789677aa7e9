#!/usr/bin/env python
"""Rewrite the JSON-schema snapshots of the event catalogue and the contracts (tests/schemas/snapshots/).

One file per model, named `<Model>.json`: `Model.model_json_schema()` pretty-printed with sorted keys and a trailing
newline. Snapshots of models that no longer exist are deleted. Review the diff before committing: a changed event
schema is a change of the wire format (docs/architecture.md "The event catalogue": a breaking change is a new type).

    .venv/bin/python scripts/update_snapshots.py           # rewrite
    .venv/bin/python scripts/update_snapshots.py --check   # exit 1 if anything would change
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT_DIR = ROOT / "tests" / "schemas" / "snapshots"

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pydantic import BaseModel  # noqa: E402

from schemas import contracts  # noqa: E402 - once the checkout is on sys.path
from schemas.events import CATALOGUE  # noqa: E402 - once the checkout is on sys.path


def contract_models() -> list[type[BaseModel]]:
    """Every public pydantic model defined in `schemas.contracts`, in definition order."""
    return [
        obj
        for name, obj in vars(contracts).items()
        if isinstance(obj, type)
        and issubclass(obj, BaseModel)
        and obj.__module__ == contracts.__name__
        and not name.startswith("_")
    ]


def models() -> dict[str, type[BaseModel]]:
    """Snapshot name -> model: every event of the catalogue and every contract, sorted by name."""
    found: dict[str, type[BaseModel]] = {}
    for model in (*CATALOGUE, *contract_models()):
        other = found.setdefault(model.__name__, model)
        if other is not model:
            raise RuntimeError(f"two snapshotted models are named {model.__name__}: {other!r} and {model!r}")
    return dict(sorted(found.items()))


def render(model: type[BaseModel]) -> str:
    return json.dumps(model.model_json_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def snapshot_path(name: str) -> Path:
    return SNAPSHOT_DIR / f"{name}.json"


def plan() -> tuple[dict[Path, str], list[Path]]:
    """What the snapshot directory should hold (path -> text), and the stale files to delete."""
    wanted = {snapshot_path(name): render(model) for name, model in models().items()}
    stale = sorted(p for p in SNAPSHOT_DIR.glob("*.json") if p not in wanted)
    return wanted, stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a snapshot is out of date")
    args = parser.parse_args(argv)

    wanted, stale = plan()
    changed = [p for p, text in wanted.items() if not p.exists() or p.read_text(encoding="utf-8") != text]
    for path in changed:
        print(f"{'outdated' if args.check else 'wrote'}: {path.relative_to(ROOT)}")
    for path in stale:
        print(f"{'stale' if args.check else 'deleted'}: {path.relative_to(ROOT)}")
    if args.check:
        return 1 if changed or stale else 0
    SNAPSHOT_DIR.mkdir(parents=True, exist_ok=True)
    for path in changed:
        path.write_text(wanted[path], encoding="utf-8")
    for path in stale:
        path.unlink()
    print(f"{len(wanted)} snapshots, {len(changed)} written, {len(stale)} deleted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
