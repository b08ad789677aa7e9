"""The ledger's declared tables (what a replay rebuilds) against what its statements write and what migrations create."""

from __future__ import annotations

import re

from services.kit.db import MIGRATIONS_DIR
from services.ledger import repository
from services.operate.replay import SCORER_TABLES

WRITES = re.compile(r"\b(?:INSERT INTO|(?<!DO )UPDATE|DELETE FROM)\s+([a-z_]+)", re.IGNORECASE)
CREATES = re.compile(r"\bCREATE TABLE (?:IF NOT EXISTS )?([a-z_]+)", re.IGNORECASE)


def written_tables(statements: list[str]) -> set[str]:
    return {table for sql in statements for table in WRITES.findall(sql)} - {"event_archive"}


def test_every_table_a_ledger_statement_writes_is_declared_for_the_rebuild():
    assert written_tables(repository.ALL_SQL) <= set(repository.TABLES)


def test_a_statement_writing_an_undeclared_table_is_caught():
    assert written_tables(["INSERT INTO new_projection (a) VALUES (1)"]) - set(repository.TABLES) == \
        {"new_projection"}


def test_every_declared_table_is_created_by_a_migration():
    created = {name for path in MIGRATIONS_DIR.glob("*.sql") for name in CREATES.findall(path.read_text())}
    assert set(repository.TABLES) <= created
    assert len(repository.TABLES) == len(set(repository.TABLES))


def test_every_scorer_table_a_migration_creates_is_rebuilt_by_a_scorer_replay():

    created = {name for path in MIGRATIONS_DIR.glob("*.sql") for name in CREATES.findall(path.read_text())}
    assert {name for name in created if name.startswith("scorer_")} == set(SCORER_TABLES)
