"""Open data: a leaderboard's ranked submissions as Parquet or JSON Lines (public runs only, never secret ones)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import asyncpg

from services.core.readmodel import operator_reads

COLUMNS = ("leaderboard", "gpu", "rank", "submission_id", "user_id", "user_name", "file_name", "score",
           "submitted_at", "harness_version", "run_id", "code")


class ExportError(Exception):
    pass


async def ranked_rows(conn: asyncpg.Connection, leaderboard: str, gpu: str | None, include_closed: bool) -> list[dict]:
    board = await operator_reads.board(conn, leaderboard)
    if board is None:
        raise ExportError(f"Leaderboard `{leaderboard}` does not exist.")
    if board["visibility"] == "closed" and not include_closed:
        raise ExportError(f"Leaderboard `{board['name']}` is closed; pass --include-closed to export it anyway.")
    rows = await operator_reads.ranked_submissions(conn, board["id"], gpu)
    return [{column: row[column] for column in COLUMNS} for row in rows]


def write_jsonl(rows: list[dict], path: Path) -> None:
    def plain(value):
        return value.isoformat() if isinstance(value, datetime) else value

    with path.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps({k: plain(v) for k, v in row.items()}, ensure_ascii=False) + "\n")


def write_parquet(rows: list[dict], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([
        ("leaderboard", pa.string()), ("gpu", pa.string()), ("rank", pa.int64()), ("submission_id", pa.int64()),
        ("user_id", pa.string()), ("user_name", pa.string()), ("file_name", pa.string()), ("score", pa.float64()),
        ("submitted_at", pa.timestamp("us", tz="UTC")), ("harness_version", pa.string()), ("run_id", pa.string()),
        ("code", pa.string()),
    ])
    table = pa.Table.from_pylist(rows, schema=schema)
    pq.write_table(table, path)


WRITERS = {"jsonl": write_jsonl, "parquet": write_parquet}
