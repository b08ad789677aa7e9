"""The runner's rooms (docs/architecture.md, "Runner rooms"): which sub-package of runner/ may import which, no cycles,
and a module map in runner/__init__.py that names every module. Each checker is also run on made-up modules to show
that it fails on a wrong import."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping

from tests.support.import_graph import ROOT, cycles, imported_modules, repository_modules

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
