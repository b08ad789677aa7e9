"""The rooms inside services/core (docs/architecture.md, "services/core rooms"): which folder may import which, SQL only
in the read model, and pure rooms that do no I/O. Each checker is also run on made-up modules to show that it fails."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping

from tests.support.import_graph import ROOT, imported_modules, repository_modules

# Inside the shared core: rooms by kind (docs/architecture.md, "services/core rooms")

CORE_ROOMS = ("rules", "admission", "presentation", "readmodel", "infrastructure", "problems", "submission", "admin",
              "opendata")
# What each room of the core may import of the core besides itself. Rules, admission and presentation are pure (no
# SQL, no I/O); the read model imports only the admission rules whose facts it reads, never presentation; nothing in
# the core imports the admin or open-data use cases, and no use case imports presentation.
CORE_MAY_IMPORT: dict[str, frozenset[str]] = {
    "rules": frozenset(),
    "admission": frozenset(),
    "presentation": frozenset({"rules"}),
    "readmodel": frozenset({"admission"}),
    "infrastructure": frozenset({"readmodel"}),
    "problems": frozenset({"admission", "infrastructure"}),
    "submission": frozenset({"admission", "readmodel"}),  # the submit use case: the rules applied to what is read
    "admin": frozenset({"readmodel", "admission", "infrastructure", "problems"}),
    "opendata": frozenset({"readmodel"}),
}
# The rooms that hold SQL: the read model, and the problem sync's own repository.
SQL_MODULES = ("services.core.readmodel", "services.core.problems.repository")
PURE_ROOMS = ("rules", "admission", "presentation")
IO_LIBRARIES = ("asyncpg", "httpx", "faststream", "nats", "huggingface_hub", "services.kit")
SQL = re.compile(r"\b(SELECT\s.+\sFROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM)\b", re.DOTALL)


def core_room(module: str) -> str | None:
    """The room of a module inside services/core: `services.core.readmodel.board_reads` -> readmodel."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["services", "core"] and len(parts) > 2 else None


def core_violations(modules: Mapping[str, str], packages: Iterable[str] = ()) -> list[str]:
    """Each import between the core's rooms that CORE_MAY_IMPORT does not allow, and each import of an I/O library
    (or the kit, which does I/O) by a pure room."""
    packages = set(packages)
    wrong = []
    for module, source in sorted(modules.items()):
        room = core_room(module)
        if room is None:
            continue
        for line, target in imported_modules(source, module, module in packages):
            other = core_room(target)
            if other is not None and other != room and other not in CORE_MAY_IMPORT.get(room, frozenset()):
                wrong.append(f"{module}:{line} imports {target} ({room} -> {other})")
            if room in PURE_ROOMS and any(target == lib or target.startswith(lib + ".") for lib in IO_LIBRARIES):
                wrong.append(f"{module}:{line} imports {target} (the pure room {room} does no I/O)")
    return wrong


def sql_outside_repositories(modules: Mapping[str, str]) -> list[str]:
    """Each string constant that reads like SQL in a core module outside SQL_MODULES."""
    found = []
    for module, source in sorted(modules.items()):
        if core_room(module) is None or any(module == m or module.startswith(m + ".") for m in SQL_MODULES):
            continue
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.search(node.value):
                found.append(f"{module}:{node.lineno}")
    return found


def test_the_core_is_sorted_into_known_rooms():
    """Every module of services/core lives in a room; a new folder gets its rules here first."""
    modules, _ = repository_modules()
    top = {m.split(".")[2] for m in modules if m.startswith("services.core.")}
    assert top == set(CORE_ROOMS)
    assert set(CORE_MAY_IMPORT) == set(CORE_ROOMS)
    assert all((ROOT / "services/core" / room / "__init__.py").exists() for room in CORE_ROOMS)


def test_the_core_rooms_import_only_what_they_may():
    modules, packages = repository_modules()
    assert core_violations(modules, packages) == []


def test_sql_lives_only_in_the_read_model_and_the_problem_repository():
    modules, _ = repository_modules()
    assert sql_outside_repositories(modules) == []


def test_the_ledger_takes_its_position_names_from_schemas_not_the_core():
    modules, packages = repository_modules()
    ledger_imports = {target for module, source in modules.items() if module.startswith("services.ledger")
                      for _, target in imported_modules(source, module, module in packages)}
    assert not any(target.startswith("services.core") for target in ledger_imports)


def test_the_core_rules_catch_each_wrong_import():
    modules = {
        "services.core.presentation.views": "from services.core.readmodel import submission_reads\n",
        "services.core.admission.policy": "def f():\n    from services.core.rules import noise\n",
        "services.core.readmodel.board_reads": "from ..presentation import views\n",
        "services.core.rules.noise": "import asyncpg\n",
        "services.core.presentation.reports": "from services.kit.bus import publish\n",
        "services.core.infrastructure.position": "from services.core.admin import policy_changes\n",
    }
    assert core_violations(modules) == [
        "services.core.admission.policy:2 imports services.core.rules (admission -> rules)",
        "services.core.infrastructure.position:1 imports services.core.admin (infrastructure -> admin)",
        "services.core.presentation.reports:1 imports services.kit.bus (the pure room presentation does no I/O)",
        "services.core.presentation.views:1 imports services.core.readmodel (presentation -> readmodel)",
        "services.core.readmodel.board_reads:1 imports services.core.presentation "
        "(readmodel -> presentation)",
        "services.core.rules.noise:1 imports asyncpg (the pure room rules does no I/O)",
    ]


def test_the_core_rules_let_the_allowed_imports_pass():
    modules = {
        "services.core.presentation.views": "from services.core.rules.noise import Noise\n",
        "services.core.readmodel.admission_reads": "from services.core.admission import policy\nimport asyncpg\n",
        "services.core.admin.precheck_review": "from services.core.readmodel import operator_reads\n"
                                               "from services.core.infrastructure import settle\n",
    }
    assert core_violations(modules) == []


def test_sql_outside_the_repositories_is_caught():
    modules = {
        "services.core.presentation.views": 'Q = """\nSELECT id\n  FROM submissions"""\n',
        "services.core.admin.dev_boards": "def f(conn):\n    return conn.execute('DELETE FROM leaderboards')\n",
        "services.core.readmodel.board_reads": "Q = 'SELECT * FROM leaderboards'\n",
        "services.core.problems.repository": "Q = 'INSERT INTO leaderboards VALUES (1)'\n",
        "services.core.rules.noise": "DOC = 'select the interval from the runs'\n",
    }
    assert sql_outside_repositories(modules) == ["services.core.admin.dev_boards:2", "services.core.presentation.views:1"]
