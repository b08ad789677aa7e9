"""Small markdown builders shared by the generated page sections."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def code(text: str) -> str:
    """An inline code span that survives backticks inside the text."""
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def cell(text: str) -> str:
    """Table-cell text: one line. Pipes inside code spans are fine in Python-Markdown tables; bare ones are escaped."""
    pieces = " ".join(str(text).split()).split("`")
    return "`".join(piece.replace("|", "\\|") if index % 2 == 0 else piece for index, piece in enumerate(pieces))


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)
