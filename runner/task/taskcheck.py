"""Field validators for task.yml (docs/authoring.md). Each raises FieldError(field, problem);
runner.task.taskfile turns that into a TaskFileError naming the file."""

from __future__ import annotations

import re
from typing import Any, get_args

from schemas.contracts import CaseValue, Precision, RooflineCase

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# Characters that would break a case line: pairs are split on ";", key from value on ":", cases on newlines.
CASE_LINE_BREAKERS = (";", ":", "\n", "\r")
TYPE_NAMES = {dict: "a mapping", list: "a list", str: "a string", int: "an integer"}


class FieldError(ValueError):
    def __init__(self, field: str, problem: str):
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


def expect(field: str, value: Any, kind: type) -> Any:
    # bool is an int subclass in Python, but `true` is never a valid number of seconds or a seed.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise FieldError(field, f"must be {TYPE_NAMES.get(kind, kind.__name__)}, got {type(value).__name__} {value!r}")
    return value


def check_int(field: str, value: Any) -> int:
    return expect(field, value, int)


def check_str_list(field: str, value: Any) -> list[str]:
    if value is None:
        return []
    items = expect(field, value, list)
    return [expect(f"{field}[{index}]", item, str) for index, item in enumerate(items)]


def check_cases(field: str, value: Any, multi_gpu: bool) -> list[dict[str, CaseValue]]:
    if value is None:
        return []
    cases = []
    for index, case in enumerate(expect(field, value, list)):
        where = f"{field}[{index}]"
        case = expect(where, case, dict)
        checked: dict[str, CaseValue] = {}
        for key, item in case.items():
            if not isinstance(key, str) or not key or any(c in key for c in CASE_LINE_BREAKERS) or key != key.strip():
                raise FieldError(f"{where}", f"invalid case key {key!r}")
            checked[key] = _check_case_value(f"{where}.{key}", item)
        if multi_gpu and not isinstance(checked.get("world_size"), int):
            raise FieldError(f"{where}.world_size", "multi_gpu tasks need an integer world_size in every case")
        cases.append(checked)
    return cases


def _check_case_value(field: str, value: Any) -> CaseValue:
    if isinstance(value, bool):
        # Upstream writes a case line with str(), so `has_bias: True` reaches every harness as the word True.
        return str(value)
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        if any(c in value for c in CASE_LINE_BREAKERS):
            raise FieldError(field, f"string values may not contain ';', ':' or a newline, got {value!r}")
        return value
    if isinstance(value, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in value):
        return list(value)
    raise FieldError(field, f"must be an integer, a word, a boolean or a list of integers, got {value!r}")


def check_config(lang: str, value: Any, file_names: set[str]) -> dict[str, Any]:
    config = expect("config", value, dict)
    allowed = ("main",) if lang == "py" else ("sources", "include_dirs", "defines", "compile_flags")
    extra = sorted(str(key) for key in config if key not in allowed)
    if extra:
        raise FieldError(f"config.{extra[0]}", f"unknown key for lang {lang} (allowed: {', '.join(allowed)})")
    if lang == "py":
        main = expect("config.main", config.get("main"), str)
        if main not in file_names:
            raise FieldError("config.main", f"{main!r} is not the name of an entry in files")
        return {"main": main}

    sources = check_str_list("config.sources", config.get("sources"))
    if not sources:
        raise FieldError("config.sources", "a cu task needs at least one source to compile")
    for index, source in enumerate(sources):
        if source not in file_names:
            raise FieldError(f"config.sources[{index}]", f"{source!r} is not the name of an entry in files")
    include_dirs = check_str_list("config.include_dirs", config.get("include_dirs"))
    compile_flags = check_str_list("config.compile_flags", config.get("compile_flags"))
    for index, flag in enumerate(compile_flags):
        if not flag.startswith("-"):
            raise FieldError(f"config.compile_flags[{index}]", f"every flag must start with '-', got {flag!r}")
    defines: dict[str, str] = {}
    for name, define in (expect("config.defines", config.get("defines") or {}, dict)).items():
        if not isinstance(name, str) or not IDENTIFIER.match(name):
            raise FieldError("config.defines", f"define name must be an identifier, got {name!r}")
        if define is None:
            define = ""
        if isinstance(define, bool) or not isinstance(define, (str, int)):
            raise FieldError(f"config.defines.{name}", f"must be a string or an integer, got {define!r}")
        defines[name] = str(define)
    return {"sources": sources, "include_dirs": include_dirs, "defines": defines, "compile_flags": compile_flags}


ROOFLINE_KEYS = ("bytes", "flops", "precision")


def check_roofline(value: Any, benchmarks: int) -> list[RooflineCase]:
    """`roofline:` one entry per benchmark, in order: `{bytes: N, flops: N, precision: fp16}`, each count an
    integer >= 0 and at least one of them positive (docs/authoring.md)."""
    if value is None:
        return []
    entries = expect("roofline", value, list)
    if len(entries) != benchmarks:
        raise FieldError("roofline", f"needs one entry per benchmark ({benchmarks}), got {len(entries)}")
    cases = []
    for index, entry in enumerate(entries):
        where = f"roofline[{index}]"
        entry = expect(where, entry, dict)
        unknown = sorted(str(key) for key in entry if key not in ROOFLINE_KEYS)
        if unknown:
            raise FieldError(f"{where}.{unknown[0]}", f"unknown key (allowed: {', '.join(ROOFLINE_KEYS)})")
        counts = {key: expect(f"{where}.{key}", entry.get(key, 0), int) for key in ("bytes", "flops")}
        for key, count in counts.items():
            if count < 0:
                raise FieldError(f"{where}.{key}", f"must be >= 0, got {count}")
        if not any(counts.values()):
            raise FieldError(where, "declares neither bytes nor flops above 0")
        precision = entry.get("precision")
        if precision is not None and precision not in get_args(Precision):
            raise FieldError(f"{where}.precision", f"must be one of {', '.join(get_args(Precision))}, "
                                                   f"got {precision!r}")
        cases.append(RooflineCase(bytes=counts["bytes"], flops=counts["flops"], precision=precision))
    return cases
