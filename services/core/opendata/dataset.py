"""The public data set's shape (GPUMODE/kernelbot-data): its columns, which rows go in, and which boards the
schedule exports. Pure; the rows come from services/core/readmodel/dataset_reads.py.

One row per (leaderboard, user, code, GPU) with the best score of that code, the earlier of equal ones; a submission
that never ranked (failed, timed out, hacked, or a test run) is one row per (leaderboard, user, code) with no score,
mode or runner, as upstream KernelBot's export writes it. `ranked_only` keeps the rows with a score.
"""

from __future__ import annotations

from datetime import datetime, timedelta

# (column, Arrow type) in the data set's order; tests/fixtures/kernelbot_data_columns.json is the written-down copy
# of the published files' schema this must equal.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("submission_id", "int64"),
    ("leaderboard_id", "int64"),
    ("problem_name", "large_string"),
    ("user_id", "large_string"),
    ("user_name", "large_string"),
    ("code_id", "int64"),
    ("file_name", "large_string"),
    ("submission_time", "timestamp[us, tz=UTC]"),
    ("status", "large_string"),
    ("score", "double"),
    ("passed", "bool"),
    ("mode", "large_string"),
    ("runner", "large_string"),
    ("code", "large_string"),
)
# The scheduled export's file, upstream's name for it.
SCHEDULED_FILENAME = "active_submissions.parquet"
# A deadline further away than this marks a practice board (upstream's year-2100 deadlines), not a competition.
COMPETITION_HORIZON = timedelta(days=365)
DEV_SUFFIX = "-dev"


def arrow_schema():
    # pyarrow is imported here, not at the top: only an export needs it, and the gateway starts without paying for it
    import pyarrow as pa

    types = {"int64": pa.int64(), "large_string": pa.large_string(), "double": pa.float64(), "bool": pa.bool_(),
             "timestamp[us, tz=UTC]": pa.timestamp("us", tz="UTC")}
    return pa.schema([(name, types[kind]) for name, kind in COLUMNS])


def _order(row: dict) -> tuple:
    # best first: a score before none, the lower score, the earlier submission
    score = row["score"]
    return (score is None, score if score is not None else 0.0, row["submission_time"], row["submission_id"])


def best_per_code(rows: list[dict], ranked_only: bool = False) -> list[dict]:
    """The best row per (leaderboard, user, code, GPU); rows without a score share the GPU `None`. Pure."""
    best: dict[tuple, dict] = {}
    for row in rows:
        if ranked_only and row["score"] is None:
            continue
        key = (row["leaderboard_id"], row["user_id"], row["code_id"], row["runner"])
        kept = best.get(key)
        if kept is None or _order(row) < _order(kept):
            best[key] = row
    return sorted(best.values(), key=lambda r: (r["problem_name"], *_order(r)))


def active_competitions(boards: list[dict], now: datetime) -> list[dict]:
    """The boards of running competitions: deadline ahead but within the horizon, and not a `-dev` board."""
    return [b for b in boards if now < b["deadline"] < now + COMPETITION_HORIZON
            and not b["name"].endswith(DEV_SUFFIX)]
