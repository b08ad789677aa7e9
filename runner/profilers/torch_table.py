"""torch.profiler's key-averages table (the CPU host's profiler, run inside the harness) as CSV, so a CPU profile
answers in the same shape as a GPU one: details text and details CSV."""

from __future__ import annotations

import csv
import io

DETAILS_TXT = "torch-details.txt"
DETAILS_CSV = "torch-details.csv"


def _spans(rule: str) -> list[tuple[int, int]]:
    """Column spans of a table rule: runs of dashes."""
    spans, start = [], None
    for position, char in enumerate(rule + " "):
        if char == "-" and start is None:
            start = position
        elif char != "-" and start is not None:
            spans.append((start, position))
            start = None
    return spans


def table_rows(table: str) -> list[list[str]]:
    """Header and rows of a key-averages table; [] when the text is not one."""
    lines = table.splitlines()
    rules = [i for i, line in enumerate(lines) if line.strip() and set(line.strip()) <= {"-", " "}]
    if len(rules) < 3:
        return []
    spans = _spans(lines[rules[0]])
    body = [lines[rules[0] + 1], *lines[rules[1] + 1:rules[2]]]
    return [[line[start:end].strip() for start, end in spans] for line in body]


def table_csv(table: str, rows: list[list[str]] | None = None) -> str:
    """`rows` (default: the table's) as CSV; a report that is not a table becomes one `Line` column."""
    rows = table_rows(table) if rows is None else rows
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    writer.writerows(rows or [["Line"], *([line] for line in table.splitlines())])
    return out.getvalue()
