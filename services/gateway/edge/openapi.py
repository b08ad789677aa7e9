"""The gateway's OpenAPI document, with the error shape every route really answers with (docs/http-api.md "Errors")."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

ERROR = {
    "title": "Error",
    "type": "object",
    "properties": {"detail": {"title": "Detail", "type": "string"}},
    "required": ["detail"],
}


def install(app: FastAPI) -> None:
    """Serve a document whose 422 responses show `{"detail": "<string>"}` instead of FastAPI's list of errors."""

    def document() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, description=app.description,
                                 routes=app.routes)
            components = schema.get("components", {}).get("schemas", {})
            components.pop("ValidationError", None)
            if "HTTPValidationError" in components:
                components["HTTPValidationError"] = ERROR
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = document
