"""The import graph of services/ (docs/architecture.md, "Rooms"): services never import each other.

Rooms and what each may import besides itself, schemas/ and runner/ (the GPU host's library):

- a service (gateway, discord, dispatcher, scorer, ledger): services.kit, services.ranking, services.core;
- the shared core (services.core): services.kit and services.ranking, never a service;
- the shared libraries (services.kit, services.ranking): each other, never a service or the core;
- operator tooling (services.cli, the `kb` command, and services.operate, the libraries behind its event-log,
  rejudge and replay commands): anything, because an operator's command is the composition root that starts a
  service (`kb serve`) or rebuilds its tables offline. Nothing else may import tooling.

Inside the shared core, each folder is a room of one kind (rules, admission, presentation, readmodel, infrastructure,
problems, admin, opendata); CORE_MAY_IMPORT below says which may import which, SQL stays in the read model, and the
pure rooms do no I/O (docs/architecture.md, "services/core rooms").

runner/ imports nothing of services/. The checker parses every module with ast, so an import inside a function counts
as much as one at the top; its own unit tests below show that it catches each kind of wrong import.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVICES = ("gateway", "discord", "dispatcher", "scorer", "ledger")
SHARED_LIBRARIES = ("kit", "ranking")
CORE = "core"
TOOLING = ("cli", "operate")
ROOMS = (*SERVICES, *SHARED_LIBRARIES, CORE, *TOOLING)
MAY_IMPORT: dict[str, frozenset[str]] = {
    **{service: frozenset({*SHARED_LIBRARIES, CORE}) for service in SERVICES},
    CORE: frozenset(SHARED_LIBRARIES),
    **{library: frozenset(SHARED_LIBRARIES) for library in SHARED_LIBRARIES},
    **{tool: frozenset(ROOMS) for tool in TOOLING},
}
# The back edge issue #13 found: the dispatcher's app took its rerun consumer from operate, which took the
# dispatcher's handlers. Named here so that it stays gone even if operate ever stops being tooling.
FORBIDDEN_EDGES = {("dispatcher", "operate")}


def module_name(path: Path, root: Path | None = None) -> str:
    parts = list(path.relative_to(root or ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(source: str, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    """Every module an import statement in `source` names, with its line, relative imports resolved."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, *([base] if base else [])])
            found.append((node.lineno, base))
            # `from services import gateway` names a room in the imported names
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names if base in ("services",)]
    return found


def room_of(module: str) -> str | None:
    """The room of a dotted module name: `services.gateway.app` -> gateway, `runner.task.payload` -> runner."""
    parts = module.split(".")
    if parts[0] == "runner":
        return "runner"
    if parts[0] == "services" and len(parts) > 1 and parts[1] in ROOMS:
        return parts[1]
    return None


def violations(modules: Mapping[str, str], packages: Iterable[str] = ()) -> list[str]:
    """Each import of `modules` (dotted name -> source) that its room may not make."""
    packages = set(packages)
    wrong = []
    for module, source in sorted(modules.items()):
        room = room_of(module)
        if room is None:
            continue
        for line, target in imported_modules(source, module, module in packages):
            other = room_of(target)
            if other is None or other == room:
                continue
            if room == "runner":
                allowed = False  # runner/ goes to GPU hosts: nothing of services/
            elif other == "runner":
                allowed = True
            else:
                allowed = other in MAY_IMPORT[room] and (room, other) not in FORBIDDEN_EDGES
            if not allowed:
                wrong.append(f"{module}:{line} imports {target} ({room} -> {other})")
    return wrong


def room_edges(modules: Mapping[str, str], packages: Iterable[str] = ()) -> set[tuple[str, str]]:
    packages = set(packages)
    edges = set()
    for module, source in modules.items():
        room = room_of(module)
        for _, target in imported_modules(source, module, module in packages):
            other = room_of(target)
            if room and other and other != room:
                edges.add((room, other))
    return edges


def cycles(edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """Every cycle between rooms, each as the path that closes it (depth-first, one report per cycle found)."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    found, done = [], set()

    def visit(node: str, path: list[str]) -> None:
        if node in path:
            found.append([*path[path.index(node):], node])
            return
        if node in done:
            return
        for nxt in sorted(graph.get(node, ())):
            visit(nxt, [*path, node])
        done.add(node)

    for start in sorted(graph):
        visit(start, [])
    return found


def repository_modules() -> tuple[dict[str, str], set[str]]:
    modules, packages = {}, set()
    for top in ("services", "runner"):
        for path in sorted((ROOT / top).rglob("*.py")):
            name = module_name(path)
            modules[name] = path.read_text()
            if path.name == "__init__.py":
                packages.add(name)
    return modules, packages


# The repository itself


def test_no_room_imports_what_it_may_not():
    modules, packages = repository_modules()
    assert violations(modules, packages) == []


def test_no_cycle_between_rooms():
    modules, packages = repository_modules()
    assert cycles(room_edges(modules, packages)) == []


def test_the_dispatcher_takes_nothing_from_operate():
    modules, packages = repository_modules()
    assert ("dispatcher", "operate") not in room_edges(modules, packages)
    assert "services.dispatcher.rerun" in modules and "services.operate.rerun" not in modules


def test_every_room_is_known():
    """A new folder under services/ must be given its rules here before it can import or be imported."""
    folders = {p.name for p in (ROOT / "services").iterdir() if (p / "__init__.py").exists()}
    assert folders == set(ROOMS)


# The checker, on synthetic modules: it must fail when someone adds a wrong import


def test_a_sibling_import_is_caught_top_level_lazy_and_relative():
    modules = {
        "services.discord.bot": "from services.gateway import repository\n",
        "services.gateway.app": "def f():\n    import services.dispatcher.handlers\n",
        "services.scorer.handlers": "from ..ledger import repository\n",
        "services.ledger.app": "from services import scorer\n",
    }
    assert violations(modules) == [
        "services.discord.bot:1 imports services.gateway (discord -> gateway)",
        "services.gateway.app:2 imports services.dispatcher.handlers (gateway -> dispatcher)",
        "services.ledger.app:1 imports services.scorer (ledger -> scorer)",
        "services.scorer.handlers:1 imports services.ledger (scorer -> ledger)",
    ]


def test_the_allowed_imports_pass():
    modules = {
        "services.discord.bot": "from services.core.readmodel import board_reads\nfrom services.kit.bus import publish\n"
                                "from schemas.events import RunCompleted\nfrom services.discord import texts\n",
        "services.dispatcher.enqueue": "from runner.task.payload import build_payload\nimport asyncio\n",
        "services.core.readmodel.standing_reads": "from services.ranking.rules import ranks_ahead\n",
        "services.cli.main": "from services.gateway.app import create_app\nfrom services.operate import stream\n",
        "services.operate.replay": "from services.ledger import repository\n",
    }
    assert violations(modules) == []


def test_the_core_and_the_libraries_import_no_service_and_no_tooling():
    modules = {
        "services.core.presentation.views": "from services.gateway import deps\n",
        "services.kit.bus": "from services.core.readmodel import submission_reads\n",
        "services.gateway.app": "from services.operate import hf_schedule\n",
        "runner.task.payload": "from services.kit import bus\n",
    }
    assert [v.split(" (")[1] for v in violations(modules)] == [
        "runner -> kit)", "core -> gateway)", "gateway -> operate)", "kit -> core)"]


def test_the_old_back_edge_is_caught_as_an_edge_and_as_a_cycle():
    modules = {
        "services.dispatcher.app": "from services.operate.rerun import router\n",
        "services.operate.rerun": "from services.dispatcher.handlers import kit\n",
    }
    assert violations(modules) == [
        "services.dispatcher.app:1 imports services.operate.rerun (dispatcher -> operate)"]
    assert cycles(room_edges(modules)) == [["dispatcher", "operate", "dispatcher"]]


def test_cycles_finds_longer_loops_and_none_in_a_tree():
    assert cycles({("a", "b"), ("b", "c"), ("c", "a")}) == [["a", "b", "c", "a"]]
    assert cycles({("a", "b"), ("a", "c"), ("b", "c")}) == []


def test_the_core_speaks_no_front_end_framework():
    """The core holds use cases, not translations: HTTP errors and Discord replies stay in the front ends."""
    modules, packages = repository_modules()
    frameworks = ("fastapi", "starlette", "discord")
    found = [f"{module} imports {target}" for module, source in modules.items() if module.startswith("services.core")
             for _, target in imported_modules(source, module, module in packages)
             if target.split(".")[0] in frameworks]
    assert found == []


def module_edges(modules: Mapping[str, str], packages: Iterable[str] = ()) -> set[tuple[str, str]]:
    """Module-to-module imports inside the repository; `from pkg import name` counts as pkg.name when that is a
    module, so a function-local import closes a cycle as surely as a top-level one."""
    packages = set(packages)
    edges = set()
    for module, source in modules.items():
        for _, target in imported_modules(source, module, module in packages):
            if target in modules and target != module:
                edges.add((module, target))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.module in modules:
                edges |= {(module, f"{node.module}.{a.name}") for a in node.names if f"{node.module}.{a.name}" in modules}
    return edges


def test_no_cycle_between_modules_of_a_service_or_of_the_runner():
    modules, packages = repository_modules()
    edges = {(a, b) for a, b in module_edges(modules, packages) if not (b in packages and a.startswith(b + "."))}
    assert cycles(edges) == []


# The runner's rooms (docs/architecture.md, "Runner rooms"): runner/ sorted by kind. Each room may import only the
# rooms named here; the entry points (the modules at the top of runner/, run with `python -m`) may import any room
# and no room imports them. profilers/ and conformance/ are rooms of their own.

RUNNER_ENTRY = "entry points"
RUNNER_MAY_IMPORT: dict[str, frozenset[str]] = {
    "task": frozenset(),  # what a run is: files and payloads; no processes, no host, no sandbox
    "host": frozenset(),  # facts about this host; never a stage
    "confinement": frozenset(),
    "launching": frozenset({"confinement"}),
    "profilers": frozenset({"task"}),
    "stages": frozenset({"task", "host", "confinement", "launching", "profilers"}),
    "conformance": frozenset({"task", "host", "confinement", "launching", "profilers", "stages"}),
}
RUNNER_ROOMS = tuple(RUNNER_MAY_IMPORT)
# Run from their file with `python -I -S` (bwrap's PID 1, and the confinement of a cold start): the standard library
# is all they can import.
RUN_FROM_FILE = ("runner.confinement.confine", "runner.confinement.sandbox_init")


def runner_room_of(module: str) -> str | None:
    """`runner.task.payload` -> task, `runner.container` -> entry points; None outside runner/ and for the package
    itself (`runner`, whose __init__ holds only the module map)."""
    parts = module.split(".")
    if parts[0] != "runner" or len(parts) == 1:
        return None
    return parts[1] if parts[1] in RUNNER_ROOMS else RUNNER_ENTRY


def runner_violations(modules: Mapping[str, str], packages: Iterable[str] = ()) -> list[str]:
    """Each import between the runner's rooms that the importing room may not make."""
    packages = set(packages)
    wrong = []
    for module, source in sorted(modules.items()):
        room = runner_room_of(module)
        if room is None:
            continue
        for line, target in imported_modules(source, module, module in packages):
            if module in RUN_FROM_FILE and target.split(".")[0] in ("runner", "schemas", "services"):
                wrong.append(f"{module}:{line} imports {target} (run from its file: standard library only)")
                continue
            other = runner_room_of(target)
            if other is None or other == room or room == RUNNER_ENTRY:
                continue
            if other not in RUNNER_MAY_IMPORT[room]:
                wrong.append(f"{module}:{line} imports {target} ({room} -> {other})")
    return wrong


def runner_room_edges(modules: Mapping[str, str], packages: Iterable[str] = ()) -> set[tuple[str, str]]:
    packages = set(packages)
    return {(room, other) for module, source in modules.items() if (room := runner_room_of(module))
            for _, target in imported_modules(source, module, module in packages)
            if (other := runner_room_of(target)) and other != room}


def unmapped(module_map: str, modules: Iterable[str], packages: Iterable[str]) -> list[str]:
    """The runner's modules and sub-packages that runner/__init__.py's map does not name, one line each: a module as
    the first word of a line, a sub-package as `name/`."""
    first_words = {line.split()[0] for line in module_map.splitlines() if line.strip()}
    missing = [p for p in packages if p.count(".") == 1 and f"{p.split('.')[1]}/" not in first_words]
    missing += [m for m in modules if m not in packages and m.startswith("runner.")
                and m.rsplit(".", 1)[1] not in first_words]
    return sorted(missing)


def test_no_runner_room_imports_what_it_may_not():
    modules, packages = repository_modules()
    assert runner_violations(modules, packages) == []


def test_no_cycle_between_runner_rooms():
    modules, packages = repository_modules()
    assert cycles(runner_room_edges(modules, packages)) == []


def test_every_runner_folder_is_a_known_room():
    """A new folder under runner/ must be given its rules here before it can import or be imported."""
    folders = {p.name for p in (ROOT / "runner").iterdir() if (p / "__init__.py").exists()}
    assert folders == set(RUNNER_ROOMS)


def test_the_runner_module_map_names_every_module_and_room():
    modules, packages = repository_modules()
    runner_doc = ast.get_docstring(ast.parse(modules["runner"])) or ""
    assert unmapped(runner_doc, [m for m in modules if m.startswith("runner.")],
                    [p for p in packages if p.startswith("runner.")]) == []


def test_the_runner_checker_catches_each_wrong_import():
    modules = {
        "runner.task.payload": "from runner.launching.process import run_process\n",
        "runner.host.sysinfo": "def f():\n    from runner.stages import telemetry\n",
        "runner.launching.starter": "from runner.stages.stage import StagePlan\n",
        "runner.confinement.sandbox": "from ..launching import process\n",
        "runner.stages.execute": "from runner.__main__ import main\n",
        "runner.profilers.ncu": "from runner.host import nvml\n",
        "runner.confinement.confine": "from runner.confinement.seccomp import build_filter\n",
    }
    assert runner_violations(modules, ["runner.confinement"]) == [
        "runner.confinement.confine:1 imports runner.confinement.seccomp (run from its file: standard library only)",
        "runner.confinement.sandbox:1 imports runner.launching (confinement -> launching)",
        "runner.host.sysinfo:2 imports runner.stages (host -> stages)",
        "runner.launching.starter:1 imports runner.stages.stage (launching -> stages)",
        "runner.profilers.ncu:1 imports runner.host (profilers -> host)",
        "runner.stages.execute:1 imports runner.__main__ (stages -> entry points)",
        "runner.task.payload:1 imports runner.launching.process (task -> launching)",
    ]


def test_the_runner_checker_lets_the_allowed_imports_pass_and_sees_room_cycles():
    allowed = {
        "runner.stages.execute": "from runner.launching.starter import Starter\nfrom runner.task import payload\n",
        "runner.container": "from runner.stages.execute import execute\nfrom runner.__main__ import main\n",
        "runner.launching.starter": "from runner.confinement.sandbox import RunSandbox\nimport os\n",
        "runner.conformance.runs": "from ..stages.execute import execute\n",
    }
    assert runner_violations(allowed) == []
    assert cycles(runner_room_edges(allowed)) == []
    looped = {**allowed, "runner.confinement.sandbox": "from runner.stages import execute\n"}
    assert cycles(runner_room_edges(looped)) == [["confinement", "stages", "launching", "confinement"]]


def test_the_module_map_check_sees_a_module_or_room_left_out():
    module_map = "task/   files\n  payload   the payload\nstages/  runs\n"
    modules = ["runner.task.payload", "runner.task.smoke", "runner.stages", "runner.host.nvml", "runner.host"]
    assert unmapped(module_map, modules, ["runner.stages", "runner.host", "runner.task"]) == [
        "runner.host", "runner.host.nvml", "runner.task.smoke"]

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
