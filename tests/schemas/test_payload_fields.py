"""Every event field the SQL names as a string is a field of the event its row holds.

The event archive keeps each event as `event_type` (the class name, services/ledger/projections.py) and `payload`
(the model's JSON). Queries read the payload as `payload->>'x'`, `payload->'x'->>'y'`, `payload #>> '{x,y}'`, or as
the columns of `jsonb_to_record(payload) AS p(x type, ...)`; nothing ties those names to the models, so a renamed or
misspelt field would read NULL in silence. This test reads the SQL of every module under services/ and runner/ (the
statements as the code composes them: module-level strings, after their f-strings are evaluated), finds for each
payload reference the event types its query filters on (`event_type = 'X'`, `event_type IN (...)`, in the innermost
subquery or UNION branch that names one), and checks the field path against those models: the field must exist on
each of them, and a nested path is followed through nested models (it stops at a dict, a list of scalars or Any).

Where no event type can be found for a reference, the field must exist on at least one event model; such references
are listed as a warning. migrations/ are left out on purpose: a migration rewrites the payloads of its time
(0090 reads `cli_id`, a field the events no longer have).
"""

from __future__ import annotations

import importlib
import re
import types
import typing
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from schemas.events import CATALOGUE

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("services", "runner")
EVENTS: dict[str, type[BaseModel]] = {event.__name__: event for event in CATALOGUE}

# `[alias.]payload` then one or more `->'key'` / `->>'key'` (or `-> 0`)
ARROWS = r"(?:\s*->>?\s*(?:'[^']*'|\d+))+"
ARROW_REF = re.compile(rf"(?<![\w.])(?:(\w+)\.)?payload({ARROWS})")
PATH_REF = re.compile(r"(?<![\w.])(?:(\w+)\.)?payload\s*#>>?\s*'\{([^}]*)\}'")
RECORD = re.compile(r"jsonb_to_record\(\s*(?:(\w+)\.)?payload\s*\)\s+(?:AS\s+)?(\w+)\s*\(([^)]*)\)", re.IGNORECASE)
KEY = re.compile(r"'([^']*)'|(\d+)")


@dataclass(frozen=True)
class Ref:
    """One payload field path named in a statement, and where."""

    alias: str | None
    path: tuple[str, ...]
    at: int


def keys(arrows: str) -> tuple[str, ...]:
    return tuple(m.group(1) if m.group(1) is not None else m.group(2) for m in KEY.finditer(arrows))


def payload_refs(sql: str) -> list[Ref]:
    """Every payload field path in one statement (the record columns of jsonb_to_record, with what follows them)."""
    refs = [Ref(m.group(1), keys(m.group(2)), m.start()) for m in ARROW_REF.finditer(sql)]
    refs += [Ref(m.group(1), tuple(k.strip().strip('"') for k in m.group(2).split(",")), m.start())
             for m in PATH_REF.finditer(sql)]
    for record in RECORD.finditer(sql):
        alias, name = record.group(1), record.group(2)
        columns = [column.split()[0] for column in record.group(3).split(",") if column.strip()]
        refs += [Ref(alias, (column,), record.start()) for column in columns]
        for m in re.finditer(rf"(?<![\w.]){re.escape(name)}\.(\w+)({ARROWS})?", sql):
            if m.group(1) in columns:
                refs.append(Ref(alias, (m.group(1), *keys(m.group(2) or "")), m.start()))
    return refs


def reads_the_archive(sql: str, alias: str | None) -> bool:
    """Whether the reference's payload is the event archive's (not another table's `payload` column)."""
    if alias is None:
        return re.search(r"\bevent_archive\b", sql) is not None
    return re.search(rf"\bevent_archive\s+(?:AS\s+)?{re.escape(alias)}\b", sql, re.IGNORECASE) is not None


def enclosing_spans(sql: str, at: int) -> list[tuple[int, int]]:
    """The parenthesised spans around position `at`, innermost first, then the whole statement."""
    spans, stack = [], []
    for i, char in enumerate(sql):
        if char == "(":
            stack.append(i)
        elif char == ")" and stack:
            start = stack.pop()
            if start < at < i:
                spans.append((start + 1, i))
    spans.sort(key=lambda span: span[1] - span[0])
    return [*spans, (0, len(sql))]


def union_branch(sql: str, start: int, end: int, at: int) -> str:
    """The UNION branch of sql[start:end] (at its own nesting depth) that holds position `at`."""
    depth, cuts = 0, [start]
    for m in re.finditer(r"\(|\)|\bUNION(?:\s+ALL)?\b", sql[start:end], re.IGNORECASE):
        token = m.group(0)
        if token == "(":
            depth += 1
        elif token == ")":
            depth -= 1
        elif depth == 0:
            cuts += [start + m.start(), start + m.end()]
    cuts.append(end)
    for left, right in zip(cuts[::2], cuts[1::2]):
        if left <= at < right:
            return sql[left:right]
    return sql[start:end]


def own_level(text: str) -> str:
    """`text` with its subqueries (a parenthesis that opens with SELECT or WITH) blanked: their filters are theirs."""
    chars, stack = list(text), []
    for i, char in enumerate(text):
        if char == "(":
            stack.append(i)
        elif char == ")" and stack:
            start = stack.pop()
            if re.match(r"\s*(SELECT|WITH)\b", text[start + 1:i], re.IGNORECASE):
                chars[start + 1:i] = " " * (i - start - 1)
    return "".join(chars)


def named_types(text: str, alias: str | None) -> set[str]:
    text = own_level(text)
    column = rf"{re.escape(alias)}\.event_type" if alias else r"(?<![\w.])event_type"
    found = set(re.findall(rf"{column}\s*=\s*'(\w+)'", text))
    for listed in re.findall(rf"{column}\s+IN\s*\(([^)]*)\)", text, re.IGNORECASE):
        found |= set(re.findall(r"'(\w+)'", listed))
    return found


def event_types(sql: str, ref: Ref) -> set[str]:
    """The event types the query filters on where `ref` stands: the innermost scope that names one."""
    for start, end in enclosing_spans(sql, ref.at):
        found = named_types(union_branch(sql, start, end, ref.at), ref.alias)
        if found:
            return found
    return set()


def models_of(annotation: object) -> list[type[BaseModel]]:
    """The models a field's annotation can hold (through Optional and unions); [] when it holds none."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [m for arg in typing.get_args(annotation) for m in models_of(arg)]
    return []


def item_of(annotation: object) -> object | None:
    """The item type of a list or tuple annotation (through Optional), for an index into it."""
    if typing.get_origin(annotation) in (list, tuple):
        return typing.get_args(annotation)[0]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        items = [item_of(arg) for arg in typing.get_args(annotation)]
        return next((item for item in items if item is not None), None)
    return None


def missing(model: type[BaseModel], path: tuple[str, ...]) -> str | None:
    """Where `path` leaves the model's fields (`precheck.outcme`), or None when every checkable step exists."""
    current: list[type[BaseModel]] = [model]
    walked: list[str] = []
    annotation: object = None
    for key in path:
        if key.isdigit() and annotation is not None:
            annotation = item_of(annotation)
            current = models_of(annotation)
            walked.append(key)
            continue
        if not current:
            return None  # a dict, a list of scalars or Any: nothing more to check
        owners = [m for m in current if key in m.model_fields]
        walked.append(key)
        if not owners:
            return ".".join(walked)
        annotation = owners[0].model_fields[key].annotation
        current = models_of(annotation)
    return None


def module_strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from module_strings(item)
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from module_strings(item)


def problems(statements: list[str]) -> tuple[list[str], list[str]]:
    """(each reference whose field its event types lack, each reference whose event type could not be found)."""
    wrong, undetermined = [], []
    for sql in statements:
        for ref in payload_refs(sql):
            if not reads_the_archive(sql, ref.alias):
                continue
            named = event_types(sql, ref)
            shown = f"payload {'.'.join(ref.path)} in {' '.join(sql[max(0, ref.at - 60):ref.at + 60].split())!r}"
            unknown = sorted(named - set(EVENTS))
            if unknown:
                wrong.append(f"{shown}: no event type {unknown}")
            elif named:
                wrong += [f"{shown}: {name} has no {where}" for name in sorted(named)
                          if (where := missing(EVENTS[name], ref.path)) is not None]
            elif any(sql in other for other in statements if other != sql):
                continue  # a fragment: checked where a statement composes it
            else:
                undetermined.append(shown)
                if all(missing(model, ref.path) is not None for model in EVENTS.values()):
                    wrong.append(f"{shown}: no event has it")
    return wrong, undetermined


def repository_statements() -> tuple[list[str], list[str]]:
    """(every module-level string of the scanned modules that name a payload field, each module whose source names
    a payload field that none of its module-level strings holds: SQL built inside a function, unchecked)."""
    statements, unchecked = [], []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            source = path.read_text()
            written = {keys(m.group(2)) for m in ARROW_REF.finditer(source)}
            written |= {m.group(2) for m in PATH_REF.finditer(source)}
            if not written:
                continue
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            module = importlib.import_module(name)
            found = [s for value in vars(module).values() for s in module_strings(value)
                     if ARROW_REF.search(s) or PATH_REF.search(s)]
            composed = {keys(m.group(2)) for s in found for m in ARROW_REF.finditer(s)}
            composed |= {m.group(2) for s in found for m in PATH_REF.finditer(s)}
            if not written <= composed:
                unchecked.append(f"{name}: {sorted(map(str, written - composed))}")
            statements += found
    return list(dict.fromkeys(statements)), unchecked


# The repository


def test_every_payload_field_in_the_sql_is_a_field_of_its_event():
    statements, _ = repository_statements()
    assert statements, "no SQL found that reads the event payload: the scan is broken"
    wrong, undetermined = problems(statements)
    if undetermined:
        warnings.warn("payload fields whose event type the query does not name (checked against every event): "
                      + "; ".join(undetermined), stacklevel=1)
    assert wrong == []


def test_every_payload_field_is_named_in_sql_the_test_can_read():
    """SQL written inside a function is not seen by the test above: each payload field must sit in a module-level
    statement."""
    _, unchecked = repository_statements()
    assert unchecked == []


# The checker, on statements with a mistake in them: each must be caught


def test_a_misspelt_field_is_caught():
    good = "SELECT e.payload->>'submission_id' FROM event_archive e WHERE e.event_type = 'SubmissionFinished'"
    assert problems([good]) == ([], [])
    wrong, _ = problems([good.replace("submission_id", "submision_id")])
    assert len(wrong) == 1 and "SubmissionFinished has no submision_id" in wrong[0]


def test_each_union_branch_is_checked_against_its_own_event():
    sql = """SELECT e.payload->>'reason' FROM event_archive e WHERE e.event_type = 'SubmissionRejected'
             UNION ALL SELECT e.payload->>'reason' FROM event_archive e WHERE e.event_type = 'SubmissionFinished'"""
    wrong, _ = problems([sql])
    assert len(wrong) == 1 and "SubmissionFinished has no reason" in wrong[0]


def test_every_type_of_an_in_list_must_have_the_field():
    sql = ("SELECT e.payload->>'status' FROM event_archive e "
           "WHERE e.event_type IN ('SubmissionFinished', 'SubmissionDeleted')")
    wrong, _ = problems([sql])
    assert len(wrong) == 1 and "SubmissionDeleted has no status" in wrong[0]


def test_nested_paths_bare_payloads_records_and_path_operators_are_followed():
    nested = ("SELECT e.payload->'precheck'->>'outcme' FROM event_archive e "
              "WHERE e.event_type IN ('SubmissionAccepted', 'SubmissionRejected')")
    bare = "SELECT payload->>'run_idd' FROM event_archive WHERE event_type = 'RunCompleted'"
    record = ("SELECT p.result->>'success' FROM event_archive e CROSS JOIN LATERAL jsonb_to_record(e.payload) "
              "AS p(run_id text, resultt jsonb) WHERE e.event_type = 'RunCompleted'")
    path = "SELECT payload #>> '{result,sucess}' FROM event_archive WHERE event_type = 'RunCompleted'"
    wrong, _ = problems([nested, bare, record, path])
    assert [w.split(": ")[-1] for w in wrong] == [
        "SubmissionAccepted has no precheck.outcme", "SubmissionRejected has no precheck.outcme",
        "RunCompleted has no run_idd", "RunCompleted has no resultt", "RunCompleted has no result.sucess"]


def test_a_misspelt_event_type_is_caught():
    wrong, _ = problems(["SELECT payload->>'gpu' FROM event_archive WHERE event_type = 'ScoreComputd'"])
    assert len(wrong) == 1 and "no event type ['ScoreComputd']" in wrong[0]


def test_a_reference_without_an_event_type_is_checked_against_every_event():
    wrong, undetermined = problems(["SELECT payload->>'leaderboard' FROM event_archive WHERE stream_seq = $1",
                                    "SELECT payload->>'no_such_field' FROM event_archive WHERE stream_seq = $1"])
    assert len(undetermined) == 2
    assert len(wrong) == 1 and "no_such_field" in wrong[0] and "no event has it" in wrong[0]


def test_another_tables_payload_and_a_fragment_are_left_alone():
    fragment = "(e.payload->>'submission_idd')::bigint"
    statement = f"SELECT {fragment} FROM event_archive e WHERE e.event_type = 'SubmissionFinished'"
    wrong, undetermined = problems([fragment, statement,
                                    "SELECT run_id, payload->>'seed' AS seed FROM dispatch_runs"])
    assert undetermined == []
    assert len(wrong) == 1 and "SubmissionFinished has no submission_idd" in wrong[0]
