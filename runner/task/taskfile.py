"""Loading a problem directory's `task.yml` into a typed Task (docs/authoring.md) and rendering case lines
(docs/authoring.md "task.yml").

Every validation error is a TaskFileError whose message starts with the task.yml path and names the field, e.g.
`problems/x/task.yml: files[2].source: '../../etc/passwd' resolves outside the checkout root ...`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from runner.task.sources import load_files, read_source
from runner.task.taskcheck import (
    FieldError,
    check_cases,
    check_config,
    check_int,
    check_roofline,
    check_str_list,
    expect,
)
from runner.task.validation_block import check_validation
from schemas.contracts import SUBMISSION_MARKER, CaseValue, CuConfig, PyConfig, Task

TASK_FILE_NAME = "task.yml"
TEMPLATE_LABELS = frozenset({"CUDA", "Python", "Triton", "HIP", "CuteDSL"})
REQUIRED_FIELDS = ("files", "lang", "description", "config")
OPTIONAL_FIELDS = (
    "templates", "libraries", "tests", "benchmarks", "test_timeout", "benchmark_timeout", "ranked_timeout",
    "ranking_by", "seed", "multi_gpu", "gpus", "harness", "roofline", "validation",
)
RANKING_CHOICES = ("last", "mean", "geom")
HARNESS_CHOICES = ("problem", "kernelbot")
# Ours wherever the problem fits it (runner/task/harness_choice.py decides per run); `harness: problem` keeps the
# problem's own eval.py.
DEFAULT_HARNESS = "kernelbot"


class TaskFileError(ValueError):
    """A task.yml that cannot be loaded; the message names the file and the offending field."""


@dataclass(frozen=True)
class LoadedProblem:
    """A loaded problem: the stored Task plus what is kept beside it (description, templates, gpus)."""

    directory: Path
    task: Task
    description: str
    templates: dict[str, str] = field(default_factory=dict)  # label -> file content
    gpus: list[str] = field(default_factory=list)  # empty when task.yml names none
    task_hash: str = ""


def load_problem(directory: Path, *, root: Path | None = None) -> LoadedProblem:
    """Load and validate `<directory>/task.yml`.

    `root` is the checkout root that every `source` and template path must stay inside. By default it is the
    nearest ancestor directory named `problems` (the reference-kernels layout), else the directory's parent.
    """
    directory = Path(directory)
    task_file = directory / TASK_FILE_NAME
    try:
        raw = yaml.safe_load(task_file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TaskFileError(f"{task_file}: cannot read file: {exc}") from exc
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise TaskFileError(f"{task_file}: invalid YAML: {exc}") from exc
    checkout_root = (root or _default_root(directory)).resolve()
    try:
        return _build(directory, raw, checkout_root)
    except FieldError as exc:
        raise TaskFileError(f"{task_file}: {exc.field}: {exc.problem}") from exc


def render_case_line(case: dict[str, CaseValue]) -> str:
    """One case as its spec line: `key: value` pairs joined by "; " with str() formatting, task.yml order."""
    return "; ".join(f"{key}: {value}" for key, value in case.items())


def render_case_file(cases: list[dict[str, CaseValue]]) -> str:
    """The content of a harness case file: one newline-terminated case line per case."""
    return "".join(render_case_line(case) + "\n" for case in cases)


def compute_task_hash(task: Task) -> str:
    """SHA-256 over the sorted (name, content) pairs of all non-submission task files (docs/authoring.md).

    The pairs are serialised as compact JSON so that no choice of names or contents can collide.
    """
    pairs = sorted((name, content) for name, content in task.files.items() if content != SUBMISSION_MARKER)
    encoded = json.dumps(pairs, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(encoded).hexdigest()


def _default_root(directory: Path) -> Path:
    resolved = directory.resolve()
    for ancestor in (resolved, *resolved.parents):
        if ancestor.name == "problems":
            return ancestor
    return resolved.parent


def _build(directory: Path, raw: Any, root: Path) -> LoadedProblem:
    data = expect("(top level)", raw, dict)
    unknown = sorted(str(key) for key in data if key not in REQUIRED_FIELDS + OPTIONAL_FIELDS)
    if unknown:
        raise FieldError(unknown[0], "unknown field (allowed: " + ", ".join(REQUIRED_FIELDS + OPTIONAL_FIELDS) + ")")
    for name in REQUIRED_FIELDS:
        if data.get(name) is None:
            raise FieldError(name, "required field is missing")

    lang = data["lang"]
    if lang not in ("py", "cu"):
        raise FieldError("lang", f"must be 'py' or 'cu', got {lang!r}")
    description = expect("description", data["description"], str)
    files = load_files("files", directory, data["files"], root)
    config = check_config(lang, data["config"], set(files))
    multi_gpu = data.get("multi_gpu", False)
    if not isinstance(multi_gpu, bool):
        raise FieldError("multi_gpu", f"must be true or false, got {multi_gpu!r}")
    ranking_by = data.get("ranking_by", "last")
    if ranking_by not in RANKING_CHOICES:
        raise FieldError("ranking_by", f"must be one of {', '.join(RANKING_CHOICES)}, got {ranking_by!r}")
    seed = data.get("seed")
    if seed is not None:
        seed = check_int("seed", seed)
    harness = data.get("harness", DEFAULT_HARNESS)
    if harness not in HARNESS_CHOICES:
        raise FieldError("harness", f"must be one of {', '.join(HARNESS_CHOICES)}, got {harness!r}")

    tests = check_cases("tests", data.get("tests"), multi_gpu)  # in the file's order: tests are named first
    benchmarks = check_cases("benchmarks", data.get("benchmarks"), multi_gpu)
    task = Task(
        lang=lang,
        files=files,
        config=PyConfig(**config) if lang == "py" else CuConfig(**config),
        libraries=check_str_list("libraries", data.get("libraries")),
        tests=tests,
        benchmarks=benchmarks,
        test_timeout=_timeout(data, "test_timeout"),
        benchmark_timeout=_timeout(data, "benchmark_timeout"),
        ranked_timeout=_timeout(data, "ranked_timeout"),
        ranking_by=ranking_by,
        seed=seed,
        multi_gpu=multi_gpu,
        harness=harness,
        roofline=check_roofline(data.get("roofline"), len(benchmarks)),
        validation=check_validation(data.get("validation"), directory, root, files),
    )
    return LoadedProblem(
        directory=directory,
        task=task,
        description=description,
        templates=_load_templates(directory, data.get("templates"), root),
        gpus=check_str_list("gpus", data.get("gpus")),
        task_hash=compute_task_hash(task),
    )


def _timeout(data: dict, name: str) -> int:
    value = check_int(name, data.get(name, 180))
    if value <= 0:
        raise FieldError(name, f"must be a positive number of seconds, got {value}")
    return value


def _load_templates(directory: Path, raw: Any, root: Path) -> dict[str, str]:
    if raw is None:
        return {}
    templates: dict[str, str] = {}
    for label, relative in expect("templates", raw, dict).items():
        if label not in TEMPLATE_LABELS:
            raise FieldError(f"templates.{label}", f"unknown label (allowed: {', '.join(sorted(TEMPLATE_LABELS))})")
        relative = expect(f"templates.{label}", relative, str)
        templates[label] = read_source(f"templates.{label}", directory, relative, root)
    return templates
