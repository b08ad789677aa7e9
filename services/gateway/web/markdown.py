"""Leaderboard descriptions as Markdown, safely: they come from problem repositories, so raw HTML in them is shown
as text (markdown-it's `html` off), links may only be http(s) or mailto, and images are not loaded (the pages'
Content-Security-Policy would refuse them anyway). Hard line breaks from the YAML stay line breaks."""

from __future__ import annotations

from functools import cache, lru_cache

from markdown_it import MarkdownIt
from markupsafe import Markup

SAFE_SCHEMES = ("http://", "https://", "mailto:")


def _safe_link(url: str) -> bool:
    lowered = url.strip().lower()
    return lowered.startswith(SAFE_SCHEMES) or ":" not in lowered.split("/", 1)[0]  # relative links pass


@cache
def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "breaks": True, "linkify": False, "typographer": False})
    md.disable("image")
    md.validateLink = _safe_link
    return md


# Descriptions change only when a problem is synced again; a board's page is read many times a second near a deadline.
@lru_cache(maxsize=1024)
def markdown(text: str | None) -> Markup:
    return Markup(_parser().render(text or ""))


@lru_cache(maxsize=1024)
def markdown_inline(text: str | None) -> Markup:
    """One paragraph's worth (the list page's summaries): code, emphasis and links, no blocks."""
    return Markup(_parser().renderInline(text or ""))
