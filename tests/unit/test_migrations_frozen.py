"""Committed migrations never change: every replica migrates at start-up, and one that already ran a migration
never runs its new text. A schema change is a new migration
(docs/operations.md, "Schema changes under rolling upgrades").

migrations/SHA256SUMS is append-only, in `sha256sum` format: a new migration is one line,
`sha256sum migrations/00NN_name.sql >> migrations/SHA256SUMS`, run from the repository root.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from services.kit.db import MIGRATIONS_DIR

ROOT = MIGRATIONS_DIR.parent
SUMS = MIGRATIONS_DIR / "SHA256SUMS"


def recorded() -> list[tuple[str, str]]:
    """(checksum, path relative to the repository root), in the order they were appended."""
    entries = []
    for number, line in enumerate(SUMS.read_text().splitlines(), 1):
        if not line.strip():
            continue
        checksum, _, path = line.partition("  ")
        assert len(checksum) == 64 and path, f"SHA256SUMS line {number} is not `<sha256>  <path>`: {line!r}"
        entries.append((checksum, path.strip()))
    return entries


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_every_committed_migration_is_unchanged():
    changed = [path for checksum, path in recorded() if (ROOT / path).exists() and digest(ROOT / path) != checksum]
    assert changed == [], (f"committed migrations were edited: {changed}. Revert them and put the change in a new "
                           "migration: replicas that already ran them never run the new text.")


def test_no_committed_migration_was_removed():
    missing = [path for _, path in recorded() if not (ROOT / path).exists()]
    assert missing == [], f"committed migrations were removed: {missing}"


def test_every_migration_is_recorded_once():
    paths = [path for _, path in recorded()]
    assert len(paths) == len(set(paths)), "a migration is listed twice in migrations/SHA256SUMS"
    unlisted = sorted(f"migrations/{p.name}" for p in MIGRATIONS_DIR.glob("*.sql")
                      if f"migrations/{p.name}" not in paths)
    assert unlisted == [], "new migrations must be recorded; from the repository root run:\n" + "\n".join(
        f"sha256sum {path} >> migrations/SHA256SUMS" for path in unlisted)


def test_a_changed_migration_is_told_apart(tmp_path):
    """The check itself can fail: one byte changed is a different checksum."""
    original = MIGRATIONS_DIR / "0001_event_machinery.sql"
    copy = tmp_path / original.name
    copy.write_bytes(original.read_bytes().replace(b"CREATE", b"create", 1))
    assert digest(copy) != dict((p, c) for c, p in recorded())["migrations/0001_event_machinery.sql"]
