"""The import graph of services/ (docs/architecture.md, "Rooms"): services never import each other.

Rooms and what each may import besides itself, schemas/ and runner/ (the GPU host's library):

- a service (gateway, discord, dispatcher, scorer, ledger): services.kit, services.ranking, services.core;
- the shared core (services.core): services.kit and services.ranking, never a service;
- the shared libraries (services.kit, services.ranking): each other, never a service or the core;
- operator tooling (services.cli, the `kb` command, and services.operate, the libraries behind its event-log,
  rejudge and replay commands): anything, because an operator's command is the composition root that starts a
  service (`kb serve`) or rebuilds its tables offline. Nothing else may import tooling.

runner/ imports nothing of services/. The rooms inside services/core and inside runner/ have tests of their own
(test_core_rooms.py, test_runner_rooms.py). The checker parses every module with ast, so an import inside a function
counts as much as one at the top; its own unit tests below show that it catches each kind of wrong import.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping

from tests.support.import_graph import ROOT, cycles, imported_modules, repository_modules

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
