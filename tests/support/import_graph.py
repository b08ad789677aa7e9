"""What the import-graph tests share: every module of services/ and runner/, parsed, and the imports each names.

The checks parse each module with ast, so an import inside a function counts as much as one at the top."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


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
