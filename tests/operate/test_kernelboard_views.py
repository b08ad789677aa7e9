"""Each `leaderboard` view against the upstream table it imitates, after an import of the same history: column names
and types, and every row, value by value (SQL NULL and JSON null told apart). The differences that remain are listed
once, in DIFFERENCES, and docs/operations.md ("What the website shows differently") states each; any other fails."""

from __future__ import annotations

from decimal import Decimal

import psycopg
from psycopg.rows import dict_row

VIEWS = ("leaderboard", "gpu_type", "templates", "user_info", "submission", "code_files", "runs",
         "submission_job_status")
# What identifies a row in both databases, where the id is not the same fact on both sides.
KEYS = {"leaderboard": ("id",), "gpu_type": ("leaderboard_id", "gpu_type"), "templates": ("leaderboard_id", "lang"),
        "user_info": ("id",), "submission": ("id",), "code_files": ("hash",),
        "runs": ("submission_id", "mode", "secret", "runner"), "submission_job_status": ("submission_id",)}
# (view, column): why it differs. A column named here is left out of the value comparison; every other is compared.
DIFFERENCES = {
    ("leaderboard", "secret_seed"): "absent: the secret seed never leaves the server",
    ("leaderboard", "task"): "the task as the platform stores it: upstream's keys, plus the ones it adds",
    ("user_info", "cli_id"): "absent: credentials are not in any view",
    ("user_info", "cli_valid"): "absent: credentials are not in any view",
    ("user_info", "cli_auth_provider"): "absent: credentials are not in any view",
    ("user_info", "web_auth_id"): "NULL until the user signs in on the website again: only digests were imported",
    ("user_info", "created_at"): "when the platform first knew the user",
    ("user_info", "web_auth_id_sha256"): "added: the digest the submit route checks (no role may read it)",
    ("user_info", "user_name"): "a user upstream had without a name is named by their id (compared below)",
    ("submission", "status"): "`hacked` also where upstream marked only the job hacked (compared below)",
    ("submission", "mode_category"): "its mode's category also where upstream left it NULL (compared below)",
    ("submission", "done"): "an unfinished upstream submission is imported as failed, so done (compared below)",
    ("submission", "code_id"): "the submission's own id: each submission has its own code row",
    ("code_files", "id"): "the submission's id",
    ("code_files", "old_code"): "absent: upstream's pre-bytea column, empty after its migration",
    ("runs", "id"): "made of the run's place in the event log and its stage",
    ("runs", "system_info"): "upstream's keys, plus the host and fingerprint the platform records",
    ("submission_job_status", "id"): "the submission's id",
    ("submission_job_status", "created_at"): "the submission's time",
}
# Types that differ where the values are the same Python and JSON values.
TYPE_DIFFERENCES = {("submission", "id"), ("submission", "code_id"), ("code_files", "id"), ("runs", "id"),
                    ("runs", "submission_id"), ("submission_job_status", "id"),
                    ("submission_job_status", "submission_id")}  # bigint here, integer upstream
COMPARED_BY_RULE = {("user_info", "user_name"), ("submission", "status"), ("submission", "mode_category"),
                    ("submission", "done")}
COLUMNS = """
SELECT table_name, column_name, data_type FROM information_schema.columns
WHERE table_schema = 'leaderboard' AND table_name = ANY(%s) ORDER BY table_name, ordinal_position
"""


def columns(url: str) -> dict[tuple[str, str], str]:
    with psycopg.connect(url) as conn:
        return {(table, column): kind for table, column, kind in conn.execute(COLUMNS, (list(VIEWS),)).fetchall()}


def rows(url: str, view: str) -> dict[tuple, dict]:
    """The view's rows by key; beside each jsonb column, whether it is SQL NULL (psycopg reads JSON null as None too,
    and kernelboard's COALESCE only replaces SQL NULL)."""
    nulls = "".join(f", {column} IS NULL AS \"{column} is NULL\"" for (table, column), kind in columns(url).items()
                    if table == view and kind == "jsonb")
    with psycopg.connect(url, row_factory=dict_row) as conn:
        found = conn.execute(f"SELECT *{nulls} FROM leaderboard.{view}").fetchall()
    return {tuple(row[k] for k in KEYS[view]): row for row in found}


def test_every_view_has_upstreams_columns_and_types_but_the_listed_differences(imported, database_url, upstream_url):
    ours, theirs = columns(database_url), columns(upstream_url)
    for column in set(ours) | set(theirs):
        if column in DIFFERENCES and (column not in ours or column not in theirs):
            continue
        assert column in ours and column in theirs, f"{column}: only {'here' if column in ours else 'upstream'}"
        if column not in TYPE_DIFFERENCES:
            assert ours[column] == theirs[column], f"{column}: {ours[column]} here, {theirs[column]} upstream"
    assert all(column in ours or column in theirs for column in DIFFERENCES), "a listed difference no longer exists"


# Upstream's ranking rule for one submission on one GPU (tests/support/upstream_db.py's UPSTREAM_RANKING, per row).
RANKS_UPSTREAM = """
SELECT s.status <> 'hacked'
   AND NOT EXISTS (SELECT 1 FROM leaderboard.submission_job_status j WHERE j.submission_id = s.id AND j.status = 'hacked')
   AND EXISTS (SELECT 1 FROM leaderboard.runs r WHERE r.submission_id = s.id AND r.secret AND r.runner = %(gpu)s
               AND r.mode = 'leaderboard' AND r.passed)
   AND NOT EXISTS (SELECT 1 FROM leaderboard.runs r WHERE r.submission_id = s.id AND r.secret AND r.runner = %(gpu)s
                   AND NOT r.passed)
FROM leaderboard.submission s WHERE s.id = %(id)s
"""


def ranks_upstream(upstream_url: str, submission_id: int, gpu: str) -> bool:
    with psycopg.connect(upstream_url) as conn:
        return conn.execute(RANKS_UPSTREAM, {"id": submission_id, "gpu": gpu}).fetchone()[0]


def job_hacked(upstream_url: str, submission_id: int) -> bool:
    with psycopg.connect(upstream_url) as conn:
        row = conn.execute("SELECT status FROM leaderboard.submission_job_status WHERE submission_id = %s",
                           (submission_id,)).fetchone()
    return row is not None and row[0] == "hacked"


def job_finished(upstream_url: str, submission_id: int) -> bool:
    with psycopg.connect(upstream_url) as conn:
        return conn.execute("SELECT count(*) FROM leaderboard.submission_job_status WHERE submission_id = %s",
                            (submission_id,)).fetchone()[0] > 0


def test_every_imported_row_matches_upstreams_value_for_value(imported, database_url, upstream_url):
    _, ids = imported
    for view in VIEWS:
        ours, theirs = rows(database_url, view), rows(upstream_url, view)
        if view == "user_info":
            # users with no name, no credential and no submission are not carried (the import's report names them)
            theirs = {key: row for key, row in theirs.items() if key in ours or row["cli_id"] or row["web_auth_id"]
                      or not row["is_banned"]}
        if view == "code_files":
            theirs = {key: row for key, row in theirs.items() if key in ours}  # code no submission refers to
        for key, upstream in theirs.items():
            assert key in ours, f"{view} {key}: upstream's row is missing here"
            here = ours[key]
            for column, value in upstream.items():
                if (view, column) in DIFFERENCES and (view, column)  not in COMPARED_BY_RULE:
                    continue
                mine = here[column]
                if view == "runs" and column in ("meta", "result") and upstream["secret"]:
                    assert mine == {}, f"{view} {key}.{column}: a secret run shows nothing"
                elif view == "runs" and column == "score" and value is not None and mine is None:
                    assert not ranks_upstream(upstream_url, key[0], key[3]), f"{view} {key}: score dropped"
                elif view == "runs" and column == "score" and value is not None:
                    assert isinstance(mine, Decimal) and float(mine) == float(value), f"{view} {key}.score: {mine!r} {value!r}"
                elif view == "submission" and column == "status" and mine == "hacked" != value:
                    assert job_hacked(upstream_url, key[0]), f"{view} {key}: hacked here only"
                elif view == "submission" and column == "mode_category" and value is None:
                    assert mine in ("test", "leaderboard"), "the category of the submission's mode"
                elif view == "submission" and column == "done" and value is False:
                    assert mine is True and not job_finished(upstream_url, key[0]), "unfinished: imported as failed"
                elif view == "user_info" and column == "user_name" and value is None:
                    assert mine == key[0], "a user upstream knew without a name is named by their id"
                else:
                    assert mine == value, f"{view} {key}.{column}: {mine!r} here, {value!r} upstream"
        extra = set(ours) - set(theirs)
        if view in ("leaderboard", "gpu_type"):
            assert extra == {k for k in ours if ours[k].get("id", ours[k].get("leaderboard_id")) == ids["web-board"]}
        elif view == "submission_job_status":
            # upstream had no job row for two submissions; here every submission has one, with its final status
            assert {ours[k]["status"] for k in extra} <= {"hacked", "failed"}
        elif view == "user_info":
            assert not extra
