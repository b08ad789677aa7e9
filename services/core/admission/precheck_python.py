"""The pre-check's Python rules, over the syntax tree (services.core.admission.precheck holds the rules' table).

Names are resolved through the file's imports and plain aliases (`import torch.cuda as tc`, `from time import
perf_counter as pc`, `cuda = torch.cuda`), so a rule matches the API and not a spelling. Comments and docstrings
never fire; other strings fire only where their text is the attack (`"/proc/self/fd"`, `"POPCORN_FD"`, `"ctypes"`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from typing import cast

# Reassigning any of these (or an attribute below them) moves the clock or the synchronisation the harness trusts.
TIMING_APIS = (
    "torch.cuda.Event", "torch.cuda.event", "torch.cuda.synchronize", "torch.cuda.Stream", "torch.cuda.current_stream",
    "torch.cuda.default_stream", "torch.cuda.streams", "torch.cuda.elapsed_time", "torch.synchronize",
    "torch.Event", "torch.Stream", "torch.cuda.profiler", "torch.profiler", "torch.autograd.profiler",
    "time.perf_counter", "time.perf_counter_ns", "time.time", "time.time_ns", "time.monotonic", "time.monotonic_ns",
    "time.process_time", "time.process_time_ns", "time.thread_time", "timeit", "triton.testing",
    "statistics", "numpy.mean", "numpy.median", "torch.mean", "torch.median", "math.fsum",
)
# Modules of a harness (ours and reference-kernels'): assigning their attributes patches the checker or the timer.
HARNESS_MODULES = ("utils", "reference", "eval", "task", "harness_supervisor", "harness_measure", "harness_worker",
                   "harness_wire", "harness_group", "harness_batch", "__main__", "builtins", "sys", "os", "gc", "inspect", "importlib")
HARNESS_ATTRIBUTES = ("__globals__", "__builtins__", "__code__", "__closure__", "__subclasses__", "f_globals",
                      "f_locals", "f_back", "f_builtins", "tb_frame", "gi_frame", "cr_frame", "ag_frame")
HARNESS_APIS = ("sys.modules", "sys._getframe", "sys._current_frames", "sys.settrace", "sys.setprofile",
                "sys.meta_path", "sys.path_hooks", "sys.addaudithook", "gc.get_objects", "gc.get_referrers",
                "gc.get_referents", "inspect.currentframe", "inspect.stack", "inspect.trace", "inspect.getouterframes",
                "inspect.getinnerframes", "inspect.getmodule", "inspect.getmembers", "inspect.getframeinfo",
                "inspect.getclosurevars", "threading.settrace", "threading.setprofile")
FD_APIS = ("os.write", "os.writev", "os.pwrite", "os.pwritev", "os.fdopen", "os.dup", "os.dup2", "os.sendfile",
           "os.set_inheritable", "io.FileIO", "contextlib.redirect_stdout", "contextlib.redirect_stderr")
STDIO = ("sys.stdout", "sys.stderr", "sys.__stdout__", "sys.__stderr__")
STREAM_APIS = ("torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.ExternalStream", "torch.cuda.set_stream",
               "torch.cuda.graph", "torch.cuda.CUDAGraph", "torch.cuda.graphs", "torch.cuda.make_graphed_callables",
               "torch.Stream", "torch.cuda.streams", "cupy.cuda.Stream", "cuda.cudart.cudaStreamCreate")
THREAD_APIS = ("threading.Thread", "threading.Timer", "_thread.start_new_thread", "_thread.start_new",
               "concurrent.futures", "multiprocessing", "torch.multiprocessing", "os.fork", "os.forkpty",
               "os.posix_spawn", "os.posix_spawnp", "os.spawnv", "os.spawnl", "os.system", "os.popen", "subprocess",
               "asyncio.to_thread", "asyncio.create_subprocess_exec", "asyncio.create_subprocess_shell")
DYNAMIC_APIS = ("builtins.exec", "builtins.eval", "builtins.compile", "builtins.__import__", "marshal.loads",
                "types.CodeType", "types.FunctionType", "pickle.loads")
DYNAMIC_BUILTINS = ("exec", "eval", "compile", "__import__")
NATIVE_MODULES = ("ctypes", "_ctypes", "cffi")
TIMING_ROOTS, HARNESS_ROOTS, FD_ROOTS, STDIO_ROOTS, STREAM_ROOTS, THREAD_ROOTS, DYNAMIC_ROOTS = (
    frozenset(group) for group in (TIMING_APIS, HARNESS_APIS, FD_APIS, STDIO, STREAM_APIS, THREAD_APIS, DYNAMIC_APIS))


def _prefixes(name: str) -> Iterator[str]:
    end = name.find(".")
    while end != -1:
        yield name[:end]
        end = name.find(".", end + 1)
    yield name


def _under(name: str, roots: frozenset[str]) -> bool:
    """`name` is one of `roots` or below one (`sys.modules.get` is under `sys.modules`)."""
    return any(prefix in roots for prefix in _prefixes(name))


_TIMING_MODULES = frozenset(prefix for api in TIMING_APIS for prefix in list(_prefixes(api))[:-1] if "." in prefix)
# Everything holding a timing API, top-level modules included: an attribute written by a computed name may be one.
_TIMING_OWNERS = frozenset(prefix for api in TIMING_APIS for prefix in list(_prefixes(api))[:-1])


def _touches_timing(target: str) -> bool:
    """The target is a timing API, below one, or a module holding one (`torch.cuda = ...`)."""
    return _under(target, TIMING_ROOTS) or target in _TIMING_MODULES


class _Reader:
    def __init__(self, aliases: dict[str, str], quiet: set[int], chained: AbstractSet[int] = frozenset()) -> None:
        self.aliases = aliases
        self.quiet = quiet  # ids of docstrings and of constants compared with (`__name__ == "__main__"`)
        self.chained = chained  # ids of names and attributes inside a longer chain: the chain is judged whole
        self.hits: list[tuple[str, int]] = []

    def visit_all(self, nodes: list[ast.AST]) -> None:
        for node in nodes:
            visit = getattr(self, f"visit_{type(node).__name__}", None)
            if visit is not None:
                visit(node)

    def hit(self, rule: str, node: ast.AST) -> None:
        self.hits.append((rule, getattr(node, "lineno", 1)))

    def qualname(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.qualname(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    # --- writes: assignment, deletion, setattr ---------------------------------------------------------------
    def written(self, target: ast.AST, node: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.written(element, node)
            return
        if isinstance(target, ast.Subscript):
            name = self.qualname(target.value)
            if name and (_under(name, frozenset({"sys.modules"})) or name.endswith("__builtins__")):
                self.hit("harness-reach", node)
            elif name and name.endswith(".__dict__"):  # `torch.cuda.__dict__["Event"] = ...` is a setattr
                self.attribute_written(name.removesuffix(".__dict__"), target.slice, node)
            elif isinstance(target.value, ast.Call) and self.qualname(target.value.func) == "vars" \
                    and target.value.args:  # so is `vars(torch.cuda)["Event"] = ...`
                self.attribute_written(self.qualname(target.value.args[0]), target.slice, node)
            return
        if not isinstance(target, ast.Attribute):
            return
        self.assigned(self.qualname(target), node)

    def attribute_written(self, owner: str | None, attribute: ast.AST, node: ast.AST) -> None:
        """`setattr(owner, attribute, ...)` and its spellings; an attribute computed at run time counts as any."""
        if not owner:
            return
        if isinstance(attribute, ast.Constant) and isinstance(attribute.value, str):
            self.assigned(f"{owner}.{attribute.value}", node)
        elif _touches_timing(owner) or owner in _TIMING_OWNERS:
            self.hit("timer-patch", node)
        elif owner.split(".")[0] in HARNESS_MODULES:
            self.hit("harness-reach", node)

    def assigned(self, name: str | None, node: ast.AST) -> None:
        if not name:
            return
        if _touches_timing(name):
            self.hit("timer-patch", node)
        elif _under(name, STDIO_ROOTS):
            self.hit("fd-write", node)
        elif "." in name and name.split(".")[0] in HARNESS_MODULES:
            self.hit("harness-reach", node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self.written(target, node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.written(node.target, node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.written(node.target, node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self.written(target, node)

    def visit_Call(self, node: ast.Call) -> None:
        func = self.qualname(node.func)
        if func in ("setattr", "delattr", "object.__setattr__", "builtins.setattr") and len(node.args) >= 2:
            self.attribute_written(self.qualname(node.args[0]), node.args[1], node)
        if isinstance(node.func, ast.Name) and node.func.id in DYNAMIC_BUILTINS and node.func.id not in self.aliases:
            self.hit("dynamic-code", node)
        if func in ("importlib.import_module", "builtins.__import__") and node.args \
                and not isinstance(node.args[0], ast.Constant):
            self.hit("dynamic-code", node)
        if func in ("open", "io.open", "builtins.open") and node.args and self._descriptor(node.args[0]):
            self.hit("fd-write", node)

    @staticmethod
    def _descriptor(arg: ast.AST) -> bool:
        """An open() of a file descriptor: an int literal, or int(...) of something (an environment variable)."""
        if isinstance(arg, ast.Constant):
            return isinstance(arg.value, int) and not isinstance(arg.value, bool)
        return isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name) and arg.func.id == "int"

    # --- reads: names of APIs, dunder attributes, strings ----------------------------------------------------
    def referenced(self, name: str, node: ast.AST) -> None:
        if _under(name, HARNESS_ROOTS):
            self.hit("harness-reach", node)
        elif _under(name, FD_ROOTS):
            self.hit("fd-write", node)
        elif _under(name, STREAM_ROOTS):
            self.hit("side-stream", node)
        elif _under(name, THREAD_ROOTS):
            self.hit("thread", node)
        elif _under(name, DYNAMIC_ROOTS):
            self.hit("dynamic-code", node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in HARNESS_ATTRIBUTES:
            self.hit("harness-reach", node)
        if id(node) in self.chained:
            return
        name = self.qualname(node)
        if name:
            self.referenced(name, node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in self.aliases and id(node) not in self.chained:
            self.referenced(self.aliases[node.id], node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if not isinstance(node.value, str) or id(node) in self.quiet:
            return
        text = node.value
        if text == "__main__":
            self.hit("harness-reach", node)
        if "POPCORN_FD" in text or "POPCORN_DATA_FD" in text:
            self.hit("fd-write", node)
        if text.startswith("/proc") or "/proc/" in text:
            self.hit("proc-access", node)
        if text in NATIVE_MODULES:
            self.hit("ctypes", node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.imported(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        self.imported(module, node)
        for alias in node.names:
            self.referenced(f"{module}.{alias.name}", node)

    def imported(self, module: str, node: ast.AST) -> None:
        root = module.split(".")[0]
        if root in NATIVE_MODULES:
            self.hit("ctypes", node)
        elif root == "__main__":
            self.hit("harness-reach", node)


def _aliases(nodes: list[ast.AST]) -> dict[str, str]:
    """Local name -> the dotted name it stands for, from imports and plain `x = a.b` aliases (two passes, so an
    alias of an alias resolves)."""
    aliases: dict[str, str] = {}
    assignments = []
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    root = alias.name.split(".")[0]
                    aliases[root] = root
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, (ast.Name, ast.Attribute)):
            assignments.append(node)
    reader = _Reader(aliases, set())
    for _ in range(2):
        for node in assignments:
            name = reader.qualname(node.value)
            target = cast(ast.Name, node.targets[0])  # only single-name assignments were collected
            if name and name.split(".")[0] in aliases and name != target.id:
                aliases[target.id] = name
    return aliases


def docstrings(nodes: list[ast.AST]) -> set[int]:
    """ids of the docstring constants of the module, its classes and functions."""
    found: set[int] = set()
    for node in nodes:
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def python_hits(nodes: list[ast.AST]) -> Iterator[tuple[str, int]]:
    """(rule, line) for every Python rule broken by a module's nodes (`list(ast.walk(tree))`, read once)."""
    quiet, chained = docstrings(nodes), set()
    for node in nodes:
        if isinstance(node, ast.Compare):
            quiet.update(id(part) for part in (node.left, *node.comparators) if isinstance(part, ast.Constant))
        elif isinstance(node, ast.Attribute) and isinstance(node.value, (ast.Name, ast.Attribute)):
            chained.add(id(node.value))
    reader = _Reader(_aliases(nodes), quiet, chained)
    reader.visit_all(nodes)
    yield from reader.hits
