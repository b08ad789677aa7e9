"""Where each Postgres table lives, generated from `migrations/` and the SQL in `services/` at every docs build.

A table's writers are the service packages whose code inserts, updates, deletes or truncates it; its readers, those
that select from or join it. A migration that adds a table shows up here without anyone editing the page.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from docgen.markdown import cell, code, table

CREATE = re.compile(r"CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?([a-z_][a-z0-9_]*)", re.IGNORECASE)
DROP = re.compile(r"DROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?([a-z_][a-z0-9_]*)", re.IGNORECASE)
# What the package names mean to a reader of the page.
PACKAGE_LABELS = {"kit": "every consumer (kit)", "operate": "operator commands", "cli": "kernelbot CLI"}


@dataclass(frozen=True)
class Table:
    name: str
    migration: str
    comment: str


def tables(migrations_dir: Path) -> list[Table]:
    """Tables alive after every migration, in creation order, each with the comment written just above it."""
    found: dict[str, Table] = {}
    for path in sorted(migrations_dir.glob("*.sql")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for index, line in enumerate(lines):
            for match in DROP.finditer(line):
                found.pop(match.group(1).lower(), None)
            match = CREATE.search(line)
            if match and not line.lstrip().startswith("--"):
                found[match.group(1).lower()] = Table(match.group(1).lower(), path.name, _comment_above(lines, index))
    return list(found.values())


def _comment_above(lines: list[str], index: int) -> str:
    comment: list[str] = []
    for line in reversed(lines[:index]):
        stripped = line.strip()
        if not stripped.startswith("--"):
            break
        comment.insert(0, stripped.removeprefix("--").strip())
    return " ".join(comment)


def access(services_dir: Path, names: list[str]) -> dict[str, tuple[set[str], set[str]]]:
    """(writers, readers) of each table: the service packages whose SQL writes or reads it."""
    alternatives = "|".join(map(re.escape, names))
    write = re.compile(rf"\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM|TRUNCATE(?:\s+TABLE)?)\s+({alternatives})\b",
                       re.IGNORECASE)
    read = re.compile(rf"(?<!DELETE )\b(?:FROM|JOIN)\s+({alternatives})\b", re.IGNORECASE)
    result: dict[str, tuple[set[str], set[str]]] = {name: (set(), set()) for name in names}
    for path in sorted(services_dir.rglob("*.py")):
        parts = path.relative_to(services_dir).parts
        if len(parts) < 2:
            continue
        text = path.read_text(encoding="utf-8")
        for match in write.finditer(text):
            result[match.group(1).lower()][0].add(parts[0])
        for match in read.finditer(text):
            result[match.group(1).lower()][1].add(parts[0])
    return result


def _labels(packages: set[str]) -> str:
    return ", ".join(PACKAGE_LABELS.get(name, name) for name in sorted(packages)) or "—"


def render(migrations_dir: Path, services_dir: Path) -> str:
    found = tables(migrations_dir)
    used = access(services_dir, [t.name for t in found])
    rows = [(code(t.name), cell(_labels(used[t.name][0])), cell(_labels(used[t.name][1] - used[t.name][0])),
             t.migration.split("_")[0], cell(t.comment or "—")) for t in found]
    return table(("table", "written by", "also read by", "migration", "what it holds"), rows)
