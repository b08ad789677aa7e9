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


# Statements that change a Postgres session beyond its transaction (the project writes SQL keywords in capitals). The services' pools skip the reset on release
# (services/kit/db.create_pool): only connections a module opens for itself may carry such state.
SESSION_STATE = re.compile(r"""["']\s*(SET\s+(?!LOCAL\b)(?!TRANSACTION\b)\w|LISTEN\b|RESET\b)"""
                           r"""|pg_advisory_lock\(|pg_try_advisory_lock\(|set_config\([^)]*,\s*false""")
OWN_CONNECTIONS = {"services/kit/leader.py", "services/kit/db.py", "services/kit/listener.py"}


def test_no_pooled_connection_is_left_with_session_state():
    found = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}" for path in (ROOT / "services").rglob("*.py")
             if str(path.relative_to(ROOT)) not in OWN_CONNECTIONS
             for number, line in enumerate(path.read_text().splitlines(), 1) if SESSION_STATE.search(line)]
    assert not found, f"session state on a pooled connection, which is released without a reset: {found}"


def test_the_session_state_rule_sees_what_it_is_for():
    for statement in ('"SET statement_timeout = 0"', "'LISTEN kb_x'", '"SELECT pg_advisory_lock(1, 2)"',
                      '"SELECT set_config(\'a.b\', \'1\', false)"', '"RESET ALL"'):
        assert SESSION_STATE.search(statement), statement
    for statement in ('"SET LOCAL enable_nestloop = off"', '"UPDATE t SET a = 1"', '"SELECT pg_advisory_xact_lock(1)"',
                      '"SET TRANSACTION ISOLATION LEVEL SERIALIZABLE"', 'SET_HOLD = "UPDATE x SET y = 1"'):
        assert not SESSION_STATE.search(statement), statement
