"""The HTTP reference section, rendered from the committed `docs/openapi.json` at every docs build.

That document is what the gateway serves at /openapi.json (tests/gateway/test_openapi.py keeps the two equal), so
the reference lists exactly the routes the code has. Operations are grouped by who calls them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from docgen.markdown import cell, code, table

METHODS = ("get", "post", "put", "delete", "patch")
GROUPS = ("Reading leaderboards", "Submitting", "Your submissions", "Registration", "Administration", "Health")
AUTH_HEADERS = {"authorization": "admin token", "x-popcorn-cli-id": "CLI id", "x-web-auth-id": "web id"}


def group_of(method: str, path: str) -> str:
    if path.startswith("/admin"):
        return "Administration"
    if path.startswith("/auth"):
        return "Registration"
    if path.startswith("/user"):
        return "Your submissions"
    if path == "/health":
        return "Health"
    if method == "post" and path.endswith("/{mode}"):
        return "Submitting"
    return "Reading leaderboards"


def schema_text(schema: dict[str, Any], document: dict[str, Any]) -> str:
    """A parameter or property type in one short phrase."""
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in schema:
        return " or ".join(schema_text(option, document) for option in schema["anyOf"])
    if schema.get("type") == "array":
        return f"array of {schema_text(schema.get('items', {}), document)}"
    if "enum" in schema:
        return " or ".join(json.dumps(value) for value in schema["enum"])
    kind = schema.get("type", "any")
    return f"{kind} ({schema['format']})" if "format" in schema else kind


def _resolve(schema: dict[str, Any], document: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def _parameters(operation: dict[str, Any], document: dict[str, Any]) -> str:
    rows = []
    for parameter in operation.get("parameters", []):
        schema = parameter.get("schema", {})
        default = json.dumps(schema["default"]) if "default" in schema else ""
        rows.append((code(parameter["name"]), parameter["in"], "yes" if parameter.get("required") else "no",
                     cell(schema_text(schema, document)), cell(default)))
    return table(("name", "in", "required", "type", "default"), rows) if rows else ""


def _body(operation: dict[str, Any], document: dict[str, Any]) -> str:
    body = operation.get("requestBody")
    if not body:
        return ""
    lines = []
    for media, content in body.get("content", {}).items():
        schema = _resolve(content.get("schema", {}), document)
        required = set(schema.get("required", []))
        rows = [(code(name), cell(schema_text(prop, document)), "yes" if name in required else "no")
                for name, prop in schema.get("properties", {}).items()]
        lines.append(f"Body: `{media}`" + ("" if rows else f" ({schema_text(schema, document)})"))
        if rows:
            lines += ["", table(("field", "type", "required"), rows)]
    return "\n".join(lines)


def _responses(operation: dict[str, Any]) -> str:
    shown = []
    for status, response in sorted(operation.get("responses", {}).items()):
        media = ", ".join(response.get("content", {})) or "no body"
        shown.append(f"`{status}` {response.get('description', '')} ({media})")
    return "Documented responses: " + "; ".join(shown) + "." if shown else ""


def operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(method, path, operation) for path, item in document["paths"].items()
            for method, operation in item.items() if method in METHODS]


def render(openapi_path: Path) -> str:
    document = json.loads(openapi_path.read_text(encoding="utf-8"))
    found = operations(document)
    out = []
    for group in GROUPS:
        members = sorted((path, method, operation) for method, path, operation in found
                         if group_of(method, path) == group)
        if not members:
            continue
        out += [f"### {group}", ""]
        for path, method, operation in members:
            headers = [AUTH_HEADERS[p["name"]] for p in operation.get("parameters", [])
                       if p["in"] == "header" and p["name"] in AUTH_HEADERS]
            out += [f"#### {method.upper()} {path}", "", f"**{operation.get('summary', '')}.**"]
            if operation.get("description"):
                out += ["", operation["description"].strip()]
            out += ["", "Credentials read: " + (", ".join(headers) if headers else "none") + "."]
            for part in (_parameters(operation, document), _body(operation, document), _responses(operation)):
                if part:
                    out += ["", part]
            out.append("")
    return "\n".join(out)
