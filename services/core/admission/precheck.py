"""The source pre-check (docs/operations.md, a KernelGuard-style first gate): rules read from a submission's source.

Pure. Python is read as a syntax tree, so names resolve through import aliases and text in comments, strings and
docstrings never fires a Python rule; CUDA / C++ (a `.cu` file, or the sources handed to `load_inline`) is read as
text with its comments removed. Each rule has a name, a severity and a one-line message; what a hit does (refuse,
mark `hacked`, warn, nothing) is the competition's choice (`outcome_of`), each rule having a default.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from services.core.admission.precheck_python import docstrings, python_hits

Outcome = str  # "refuse" | "hacked" | "warn" | "off"
OUTCOMES = ("refuse", "hacked", "warn", "off")
# Worst first: the outcome of several hits is the worst of theirs.
OUTCOME_ORDER = {"refuse": 0, "hacked": 1, "warn": 2, "off": 3}
CHECKED_MODES = ("benchmark", "profile", "leaderboard")  # docs/operations.md: not for `test`, as upstream
UNAVAILABLE = "KernelGuard pre-check is unavailable right now. Please try again later."
UNREADABLE = "KernelGuard pre-check could not read the submission: it is nested too deeply. Please simplify it."


@dataclass(frozen=True)
class Rule:
    name: str
    severity: str  # high | medium | low
    message: str
    default: Outcome


RULES: dict[str, Rule] = {rule.name: rule for rule in (
    Rule("timer-patch", "high", "reassigns a timing or synchronisation API", "hacked"),
    Rule("harness-reach", "high", "reaches into the harness through __main__, __globals__, sys.modules, gc, "
                                  "inspect or frames", "hacked"),
    Rule("fd-write", "high", "writes to an inherited file descriptor or redirects standard output", "hacked"),
    Rule("ctypes", "high", "loads native code through ctypes, cffi or dlopen", "hacked"),
    Rule("proc-access", "high", "reads or writes /proc", "hacked"),
    Rule("side-stream", "medium", "creates or switches CUDA streams or captures CUDA graphs", "refuse"),
    Rule("thread", "medium", "starts threads or processes", "refuse"),
    Rule("dynamic-code", "medium", "runs code built at run time (exec, eval, compile, __import__)", "warn"),
)}
# Rules a multi-GPU task needs to break: its ranks are processes the harness starts and the user code joins.
ALLOWED_BY_MULTI_GPU = ("thread",)


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: str
    message: str
    line: int


@dataclass(frozen=True)
class Verdict:
    """What the pre-check decided for one submission: its worst outcome and every finding that counted."""

    outcome: Outcome  # refuse | hacked | warn
    findings: tuple[Finding, ...]
    detail: str


# --- CUDA / C++ text rules ---------------------------------------------------------------------------------------

_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_TIMING_DEFINITION = re.compile(
    r"\b(cudaEvent(?:ElapsedTime|Record|Synchronize|Create\w*|Query)|cuEvent\w+|cudaDeviceSynchronize|"
    r"cudaStreamSynchronize|clock_gettime|gettimeofday)\s*\([^;{)]*\)\s*(?:noexcept\s*)?\{")
_C_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("fd-write", re.compile(r"POPCORN_FD|\b(?:fdopen|dup2|dup3)\s*\(|\bwrite\s*\(\s*(?:[3-9]|\d\d+)\s*,")),
    ("ctypes", re.compile(r"\b(?:dlopen|dlsym)\s*\(|LD_PRELOAD")),
    ("proc-access", re.compile(r"\"/proc/")),
    ("side-stream", re.compile(r"\b(?:cudaStreamCreate\w*|cuStreamCreate\w*|cudaStreamBeginCapture|"
                               r"cudaGraphLaunch|getStreamFromPool)\b")),
    ("thread", re.compile(r"\bstd::(?:thread|async|jthread)\b|\bpthread_create\s*\(|\bfork\s*\(\s*\)")),
)


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def c_hits(source: str, first_line: int = 1) -> Iterator[tuple[str, int]]:
    """(rule, line) for CUDA / C++ source; comments are blanked first, keeping line numbers."""
    text = _COMMENTS.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), source)
    for match in _TIMING_DEFINITION.finditer(text):
        yield "timer-patch", first_line + _line_of(text, match.start()) - 1
    for rule, pattern in _C_RULES:
        for match in pattern.finditer(text):
            yield rule, first_line + _line_of(text, match.start()) - 1


# --- the check --------------------------------------------------------------------------------------------------


def findings_of(code: str, file_name: str) -> list[Finding]:
    """Every rule hit of a source file, one finding per (rule, line), in line order."""
    if file_name.lower().endswith(".py"):
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError):
            return []  # it cannot run either; the harness reports the error
        nodes = list(ast.walk(tree))
        hits = list(python_hits(nodes))
        skipped = docstrings(nodes)
        for node in nodes:  # sources of inline CUDA / C++ travel as Python strings
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "\n" in node.value \
                    and id(node) not in skipped:
                hits.extend(c_hits(node.value, node.lineno))
    else:
        hits = list(c_hits(code))
    seen = sorted(set(hits), key=lambda hit: (hit[1], hit[0]))
    return [Finding(rule, RULES[rule].severity, RULES[rule].message, line) for rule, line in seen]


def outcome_of(rule: str, overrides: Mapping[str, str], multi_gpu: bool = False) -> Outcome:
    """The competition's outcome for a rule: its override, else the rule's default."""
    if rule in overrides:
        return overrides[rule]
    if multi_gpu and rule in ALLOWED_BY_MULTI_GPU:
        return "off"
    return RULES[rule].default


def rejection_text(findings: list[Finding] | tuple[Finding, ...]) -> str:
    """docs/operations.md: `Submission rejected by KernelGuard pre-check (<reason>). Matched rules: A, B.`"""
    rules = sorted({f.rule for f in findings})
    first = findings[0]
    reason = f"line {first.line}: {first.message}"
    return f"Submission rejected by KernelGuard pre-check ({reason}). Matched rules: {', '.join(rules)}."


def findings_for(code: str, file_name: str, mode: str) -> list[Finding]:
    """The findings that may count for a submission: none in a mode that is not checked. The costly part (it
    parses the source), independent of any competition's outcomes, so it can run before admission's transaction."""
    return findings_of(code, file_name) if mode in CHECKED_MODES else []


def verdict_of(findings: list[Finding], overrides: Mapping[str, str] | None = None,
               multi_gpu: bool = False) -> Verdict | None:
    """The competition's verdict on the findings: None when nothing that counts fired."""
    overrides = overrides or {}
    counted = [f for f in findings if outcome_of(f.rule, overrides, multi_gpu) != "off"]
    if not counted:
        return None
    outcome = min((outcome_of(f.rule, overrides, multi_gpu) for f in counted), key=OUTCOME_ORDER.__getitem__)
    # the reason names a finding of the deciding outcome, so a warning never explains a refusal
    deciding = [f for f in counted if outcome_of(f.rule, overrides, multi_gpu) == outcome]
    ordered = tuple(deciding + [f for f in counted if f not in deciding])
    if outcome == "warn":
        detail = f"KernelGuard pre-check warning: {', '.join(sorted({f.rule for f in counted}))}"
    else:
        detail = rejection_text(ordered)
    return Verdict(outcome, ordered, detail)


def precheck(code: str, file_name: str, mode: str, overrides: Mapping[str, str] | None = None,
             multi_gpu: bool = False) -> Verdict | None:
    """The pre-check's verdict, None when nothing that counts fired (or the mode is not checked)."""
    return verdict_of(findings_for(code, file_name, mode), overrides, multi_gpu)


def validate_overrides(overrides: Mapping[str, str]) -> dict[str, str]:
    """A competition's outcomes per rule, checked: unknown rules and outcomes are errors naming them."""
    for rule, outcome in overrides.items():
        if rule not in RULES:
            raise ValueError(f"unknown pre-check rule {rule!r}; rules: {', '.join(sorted(RULES))}")
        if outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {outcome!r} for rule {rule!r}; outcomes: {', '.join(OUTCOMES)}")
    return dict(overrides)
