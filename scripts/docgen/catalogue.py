"""The event catalogue page section, generated from `schemas/` at every docs build, so it cannot drift from code.

For each event: its subject, what it means (the class docstring), its message id rule (read from `identity()`), its
fields, the durable consumers declared in the services' AsyncAPI documents, and the service packages whose code
names the type. Nested models the events carry (results, planned runs, rank entries) follow the events.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
import textwrap
import types
import typing
from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from docgen.markdown import cell, code, table

# Fields every event carries; documented once, in the envelope table.
ENVELOPE_FIELDS = ("schema_version", "event_id", "occurred_at", "correlation_id", "causation_id")
SECTIONS = {
    "leaderboard": "Leaderboards", "user": "People", "submission": "Submissions", "run": "Runs",
    "score": "Scores", "intake": "Policy", "rate_limit": "Policy", "invite": "Policy", "rejudge": "Rejudging",
}


def type_name(annotation: object) -> str:
    """A field type as a reader writes it: `list[PlannedRun]`, `int | None`, `Literal['a', 'b']`."""
    if annotation is type(None):
        return "None"
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(repr(arg) for arg in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(arg) for arg in args)
    if origin is not None:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(type_name(arg) for arg in args)}]"
    return getattr(annotation, "__name__", str(annotation))


def default_of(field) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        return "(computed)" if field.default_factory.__name__ == "utcnow" else f"{field.default_factory.__name__}()"
    return "—" if field.default is PydanticUndefined else repr(field.default)


def identity_rule(event: type) -> str:
    """The message id as `<Type>:<expression of identity()>`, `self.` dropped: what the duplicate window keys on."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(event.identity)))
    except (OSError, TypeError, SyntaxError):
        return f"{event.__name__}:…"
    returns = [node for node in ast.walk(tree) if isinstance(node, ast.Return) and node.value is not None]
    if not returns:
        return f"{event.__name__}:…"
    value = returns[-1].value
    pieces = value.values if isinstance(value, ast.JoinedStr) else [ast.FormattedValue(value, -1, None)]
    expression = "".join(piece.value if isinstance(piece, ast.Constant) else "{" + _placeholder(piece.value) + "}"
                         for piece in pieces)
    return f"{event.__name__}:{expression}"


def _placeholder(node: ast.expr) -> str:
    """`str(self.x)` reads as `x`; a digest computed from several fields as `sha256 of ...`."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str" and node.args:
        node = node.args[0]
    text = ast.unparse(node)
    if "sha256" in text:
        return "sha256 prefix of the content"
    return text.replace("self.", "")


def subject_matches(pattern: str, subject: str) -> bool:
    """NATS subject matching: `*` is one token, `>` the rest."""
    want, have = pattern.split("."), subject.split(".")
    for index, token in enumerate(want):
        if token == ">":
            return len(have) > index
        if index >= len(have) or (token != "*" and token != have[index]):
            return False
    return len(want) == len(have)


def subscribers(asyncapi_dir: Path) -> list[tuple[str, str, str]]:
    """(service, durable consumer, subject pattern) of every receive operation in docs/asyncapi/*.json."""
    found = []
    for path in sorted(asyncapi_dir.glob("*.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        for name, operation in document.get("operations", {}).items():
            if operation.get("action") != "receive":
                continue
            channel = document["channels"][operation["channel"]["$ref"].rsplit("/", 1)[-1]]
            found.append((path.stem, name, channel["address"]))
    return found


def code_mentions(services_dir: Path, names: Iterable[str]) -> dict[str, list[str]]:
    """Which service packages name each type in their code (publishing, handling or projecting it)."""
    names = list(names)
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")
    found: dict[str, set[str]] = {name: set() for name in names}
    for path in sorted(services_dir.rglob("*.py")):
        package = path.relative_to(services_dir).parts[0]
        if package.endswith(".py"):
            continue
        for match in pattern.finditer(path.read_text(encoding="utf-8")):
            found[match.group(1)].add(package)
    return {name: sorted(packages) for name, packages in found.items()}


def nested_models(models: Iterable[type[BaseModel]]) -> list[type[BaseModel]]:
    """Every pydantic model reachable from the fields of `models`, in first-seen order."""
    seen: list[type[BaseModel]] = []
    pending = list(models)
    while pending:
        model = pending.pop(0)
        for field in model.model_fields.values():
            for inner in _models_in(field.annotation):
                if inner not in seen and inner not in models:
                    seen.append(inner)
                    pending.append(inner)
    return seen


def _models_in(annotation: object) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in typing.get_args(annotation) for model in _models_in(arg)]


def fields_table(model: type[BaseModel], skip: Sequence[str] = ()) -> str:
    rows = [(code(name), cell(code(type_name(field.annotation))), cell(default_of(field)))
            for name, field in model.model_fields.items() if name not in skip]
    return table(("field", "type", "default"), rows) if rows else "No fields beyond the envelope."


def _section(event: type) -> str:
    return SECTIONS.get(event.subject.split(".")[1], "Other")


def _paragraph(text: str) -> list[str]:
    return [text, ""] if text else []


def _doc(model: type) -> str:
    own = model.__dict__.get("__doc__")
    return inspect.cleandoc(own) if own else ""


def render(events: Sequence[type], asyncapi_dir: Path, services_dir: Path, envelope: type[BaseModel]) -> str:
    """The catalogue as markdown: the envelope, a summary table, then one section per event and nested model."""
    consumers = subscribers(asyncapi_dir)
    nested = nested_models(events)
    mentions = code_mentions(services_dir, [event.__name__ for event in events])
    out = ["### The envelope", "", *_paragraph(_doc(envelope)),
           fields_table(envelope, skip=[n for n in envelope.model_fields if n not in ENVELOPE_FIELDS]), ""]
    summary = [(f"[{event.__name__}](#{event.__name__.lower()})", code(event.subject), code(identity_rule(event)))
               for event in events]
    out += ["### Every event", "", table(("event", "subject", "message id"), summary), ""]
    current = None
    order = list(dict.fromkeys(_section(event) for event in events))
    for event in sorted(events, key=lambda event: order.index(_section(event))):
        section = _section(event)
        if section != current:
            out += [f"### {section}", ""]
            current = section
        listening = sorted({f"{service} (`{name}`)" for service, name, pattern in consumers
                            if subject_matches(pattern, event.subject)})
        out += [f"#### {event.__name__}", "", *_paragraph(_doc(event)), f"- Subject: `{event.subject}`",
                f"- Message id: `{identity_rule(event)}`",
                f"- Durable consumers: {', '.join(listening) or 'none declared'}",
                f"- Named in the code of: {', '.join(mentions[event.__name__]) or 'no service'}", "",
                fields_table(event, skip=ENVELOPE_FIELDS), ""]
    if nested:
        out += ["### Types inside events", ""]
        for model in nested:
            out += [f"#### {model.__name__}", "", *_paragraph(_doc(model)), fields_table(model), ""]
    return "\n".join(out)


def render_streams(specs: Sequence) -> str:
    """The JetStream streams as `schemas/streams.py` declares them (the one definition every service uses)."""
    rows = [(code(spec.name), cell(", ".join(code(subject) for subject in spec.subjects)),
             f"{spec.duplicate_window_s:g} s", f"{spec.max_msg_size // (1024 * 1024)} MiB",
             "forever" if not spec.max_age_s else f"{spec.max_age_s / 86400:g} days") for spec in specs]
    return table(("stream", "subjects", "duplicate window", "largest message", "kept"), rows)
