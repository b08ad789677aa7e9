"""Server-rendered pages: Jinja2 templates with autoescaping on, so every value a user chose is shown as text."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from services.gateway.web.markdown import markdown, markdown_inline

TEMPLATES = Path(__file__).parent / "templates"
# Every page's headers: no script may run, and nothing is kept (a page may hold a form token).
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin", "Cache-Control": "no-store",
}


@cache
def environment() -> Environment:
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True)
    env.filters.update(markdown=markdown, markdown_inline=markdown_inline)
    return env


def render(template: str, **context: object) -> str:
    return environment().get_template(template).render(**context)
