"""`kernelbot problems check PATH`: whether each problem of a reference-kernels-style checkout can run where it says,
before any GPU sees it (docs/toolchains.md).

For every problem of every competition file: each GPU it names resolves in the dispatcher's catalogue; the image
that serves that GPU (its vendor family's toolchain manifest) supports the problem's language; and every module its
reference, harness and templates import is the standard library's, one of the problem's own files, or one the
manifest says the image provides. Imports guarded by `try: ... except ImportError` are optional and not required.
Pure but for reading the checkout and the manifests.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from runner.task.competition import CompetitionFileError, competition_files, load_competition
from runner.task.taskfile import TaskFileError, load_problem
from runner.task.toolchain import family_for_gpu, load
from schemas.contracts import SUBMISSION_MARKER
from services.dispatcher.catalogue import Catalogue
from services.dispatcher.default_gpus import configured_catalogue
from services.dispatcher.settings import DispatcherSettings

# What a harness or reference may import without an image providing it: the submission, which the run supplies.
RUN_SUPPLIED = frozenset({"submission"})
IMPORT_LINE = re.compile(r"(?m)^\s*(?:from\s+([A-Za-z_][\w.]*)\s+import\b|import\s+([A-Za-z_][\w.]*(?:\s*,\s*"
                         r"[A-Za-z_][\w.]*)*))")
OPTIONAL_GUARDS = frozenset({"ImportError", "ModuleNotFoundError", "Exception"})


@dataclass
class ProblemCheck:
    where: str  # `<set>.yaml/<board name>`
    failures: list[str] = field(default_factory=list)
    served: list[str] = field(default_factory=list)  # `GPU (family)` for each GPU that resolved

    @property
    def ok(self) -> bool:
        return not self.failures

    def line(self) -> str:
        if self.ok:
            return f"ok    {self.where}: {', '.join(self.served)}"
        return f"FAIL  {self.where}: {'; '.join(self.failures)}"


def dispatcher_catalogue(source: str | None = None) -> Catalogue:
    """The catalogue as the dispatcher resolves GPU names (its settings, or `source` in place of KB_GPU_CATALOGUE)."""
    return configured_catalogue(DispatcherSettings(), source)


def _optional(tree: ast.AST) -> set[int]:
    """Line numbers of imports inside a `try` whose handler catches a failed import."""
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try):
            caught = {getattr(h.type, "id", None) for h in node.handlers} | \
                {getattr(e, "id", None) for h in node.handlers if isinstance(h.type, ast.Tuple) for e in h.type.elts}
            if caught & OPTIONAL_GUARDS or any(h.type is None for h in node.handlers):
                lines |= {n.lineno for stmt in node.body for n in ast.walk(stmt)
                          if isinstance(n, (ast.Import, ast.ImportFrom))}
    return lines


def imported_modules(source: str) -> set[str]:
    """Top-level modules `source` needs (relative and optional imports left out). A file that is not valid Python
    (a template with `...` placeholders) is read line by line."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {name.strip().split(".")[0] for groups in IMPORT_LINE.findall(source) for group in groups
                for name in group.split(",") if name.strip()}
    optional, found = _optional(tree), set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.lineno in optional:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def check_problem(where: str, directory: Path, root: Path, gpus: list[str] | None, catalogue: Catalogue
                  ) -> ProblemCheck:
    check = ProblemCheck(where)
    try:
        problem = load_problem(directory, root=root)
    except TaskFileError as exc:
        check.failures.append(str(exc).replace(f"{root}/", ""))
        return check
    task = problem.task
    # The validation script runs in the same image as the harness, beside the task's files or its own.
    files = {**task.files, **(task.validation.files if task.validation else {})}
    own = {Path(name).stem for name in files} | RUN_SUPPLIED
    sources = [content for name, content in files.items() if name.endswith(".py") and content != SUBMISSION_MARKER]
    if task.lang == "py":
        sources += list(problem.templates.values())
    needed = set().union(*(imported_modules(text) for text in sources)) - own - set(sys.stdlib_module_names)
    names = gpus or problem.gpus
    if not names:
        check.failures.append("names no GPU")
    for gpu in names:
        entry = catalogue.gpus.get(gpu)
        inactive = catalogue.inactive.get(gpu)
        if entry is None and inactive is None:
            check.failures.append(f"{gpu}: not in the GPU catalogue")
            continue
        # A default entry without its backend's credentials still says which image would serve it: the problem is
        # checked against that image.
        family = family_for_gpu(gpu, entry.backend, entry.target, entry.queues) if entry is not None \
            else family_for_gpu(gpu, inactive.backend, inactive.target)
        if family is None:  # local and null GPUs run in this host's environment, which no manifest describes
            check.served.append(f"{gpu} ({entry.backend}, no image)")
            continue
        toolchain = load(family)
        if task.lang not in toolchain.languages:
            check.failures.append(f"{gpu}: the {family} image runs {', '.join(toolchain.languages)}, not {task.lang}")
        missing = sorted(needed - toolchain.provided_modules)
        if missing:
            check.failures.append(f"{gpu}: the {family} image does not provide {', '.join(missing)}")
        # what an inactive entry lacks is `kernelbot runners`' to say, once for all its problems
        check.served.append(f"{gpu} ({family}" + (", inactive)" if inactive else ")"))
    return check


def check_problems(root: Path, catalogue: Catalogue) -> list[ProblemCheck]:
    """One check per problem of every competition file under `root` (a `problems/` directory)."""
    checks = []
    for path in competition_files(root):
        try:
            competition = load_competition(path)
        except CompetitionFileError as exc:
            checks.append(ProblemCheck(path.name, [str(exc).replace(f"{root}/", "")]))
            continue
        for entry in competition.entries:
            where = f"{path.name}/{entry.name or '?'}"
            if entry.problem or entry.name is None or entry.directory is None:
                checks.append(ProblemCheck(where, [entry.problem or "missing name or directory"]))
                continue
            directory = (root / entry.directory).resolve()
            if not directory.is_relative_to(root.resolve()) or not (directory / "task.yml").is_file():
                checks.append(ProblemCheck(where, [f"directory {entry.directory} has no task.yml"]))
                continue
            checks.append(check_problem(where, directory, root, entry.gpus, catalogue))
    return checks
