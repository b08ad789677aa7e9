"""MkDocs hook (mkdocs.yml `hooks:`): fills the generated sections of the pages at build time.

A page asks for a section with a line of its own, `<!-- generated: NAME -->`; an unknown NAME stops the build.
Nothing here fetches anything: the sections come from the checkout's code (schemas/, migrations/, services/) and
from the committed documents in the docs directory (openapi.json, asyncapi/).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->[ \t]*$", re.MULTILINE)


# The generators import the project late, inside each function: MkDocs loads this file with sys.path as it was and
# restores it afterwards, so the checkout is importable only once _importable() has run for the page.


def _event_catalogue(docs: Path) -> str:
    from docgen import catalogue
    from schemas.envelope import Event
    from schemas.events import CATALOGUE

    return catalogue.render(CATALOGUE, docs / "asyncapi", ROOT / "services", Event)


def _streams(docs: Path) -> str:
    from docgen import catalogue
    from schemas.streams import ALL_STREAMS

    return catalogue.render_streams(ALL_STREAMS)


def _tables(docs: Path) -> str:
    from docgen import tables

    return tables.render(ROOT / "migrations", ROOT / "services")


def _http_reference(docs: Path) -> str:
    from docgen import openapi_page

    return openapi_page.render(docs / "openapi.json")


GENERATORS: dict[str, Callable[[Path], str]] = {
    "event-catalogue": _event_catalogue,
    "streams": _streams,
    "tables": _tables,
    "http-reference": _http_reference,
}


def _importable() -> None:
    # MkDocs restores sys.path after loading a hook, so the generators' packages are made importable on each use.
    for entry in (ROOT, ROOT / "scripts"):
        if str(entry) not in sys.path:
            sys.path.insert(0, str(entry))


def expand(markdown: str, docs: Path, where: str) -> str:
    """`markdown` with every marker replaced by its generated section; `docs` is the docs directory."""
    _importable()

    def replace(match: re.Match) -> str:
        generator = GENERATORS.get(match.group(1))
        if generator is None:
            raise PluginError(f"{where}: unknown generated section {match.group(1)!r} "
                              f"(known: {', '.join(sorted(GENERATORS))})")
        return generator(docs)

    return MARKER.sub(replace, markdown)


def on_page_markdown(markdown: str, page, config, files) -> str:
    return expand(markdown, Path(config.docs_dir), page.file.src_uri)
