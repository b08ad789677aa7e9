"""What kernelboard, gpumode.com's website (gpu-mode/kernelboard at cd945d5), does with the rows of its queries,
restated here so that tests check the platform against kernelboard's behaviour and not only against its SQL.

Kernelboard connects with psycopg2 and one `DATABASE_URL`; each request's statements run in one transaction that is
committed at the end. Its reads come back as psycopg gives them (jsonb as dicts, numeric as `Decimal`) and go out
through Flask's JSON, which writes a `Decimal` as a string. The only call it makes to the platform's API is the submit
(`POST /submission/{leaderboard}/{gpu}/{mode}`, multipart `file`, header `X-Web-Auth-Id`).

Each function below follows one of its code paths: where kernelboard would raise, so does it (a `.get` on what the
database gave, an `int()` of a count), because that is what turns a page into kernelboard's 500 page.
"""

from __future__ import annotations

import decimal
import json
import secrets
from typing import Any

import httpx
import psycopg

from tests.support import kernelboard_queries as kb


def connect(database_url: str) -> psycopg.Connection:
    return psycopg.connect(database_url)


def sign_in(conn: psycopg.Connection, identity: str, user_name: str) -> tuple:
    """lib/auth_utils.py `ensure_user_info_with_token`, called by the OAuth callback: a new user gets a row with a
    fresh 32-hex-digit token, a known one without a token gets one, a token once set is never replaced."""
    with conn.cursor() as cur:
        cur.execute(kb.ENSURE_WEB_ID, (identity, user_name, secrets.token_hex(16)))
        row = cur.fetchone()
        if row is None:
            cur.execute("SELECT id, user_name, web_auth_id FROM leaderboard.user_info WHERE id = %s", (identity,))
            row = cur.fetchone()
    conn.commit()
    return row


def submit(conn: psycopg.Connection, api: httpx.Client, identity: str, leaderboard: str, gpu: str, mode: str,
           file_name: str, code: bytes) -> httpx.Response | None:
    """api/submission.py `submission`: the token read back from the database, forwarded as X-Web-Auth-Id; None
    where kernelboard answers its own 500 ("cannot find user info") without calling the API."""
    with conn.cursor() as cur:
        cur.execute(kb.USER_TOKEN, (identity,))
        row = cur.fetchone()
    conn.commit()
    token = row[0] if row else None
    if not token:
        return None
    return api.post(f"/submission/{leaderboard}/{gpu}/{mode}", headers={"X-Web-Auth-Id": token},
                    files={"file": (file_name, code, "text/x-python")}, timeout=180)


def submission_history(conn: psycopg.Connection, leaderboard_id: int, user_id: str, limit: int = 20,
                       offset: int = 0) -> list[dict[str, Any]]:
    """api/submission.py `list_user_submissions_with_status`: the signed-in user's submissions on a board, each public
    run given its report, as the leaderboard page's "submissions" tab shows them."""
    with conn.cursor() as cur:
        cur.execute(kb.LIST_SUBMISSIONS, (leaderboard_id, user_id, limit, offset))
        rows = cur.fetchall()
    conn.commit()
    items = []
    for row in rows:
        runs = json.loads(row[9]) if isinstance(row[9], str) else (row[9] or [])
        for run in runs:
            run["report"] = report(run)
            run["result"] = {}
        items.append({"submission_id": row[0], "leaderboard_id": row[1], "file_name": row[2], "submitted_at": row[3],
                      "submission_done": row[4], "status": row[5], "error": row[6], "last_heartbeat": row[7],
                      "job_created_at": row[8], "runs": runs})
    return items


def report(run: dict[str, Any]) -> dict[str, str]:
    """`toReport`: nothing for a crashed run, else the log of its stage."""
    if _crashed(run["compilation"], run["passed"]):
        return {}
    log = {"test": test_log, "benchmark": benchmark_log, "leaderboard": benchmark_log}.get(run["mode"])
    text = log(run["result"]) if log else ""
    return {"log": text} if text else {}


def _crashed(compilation, passed: bool) -> bool:
    if not passed:
        return True
    # as kernelboard does it: a JSON null here is Python's None, and None has no .get
    success = compilation.get("success", False)
    return bool(compilation) and not success


def test_log(result: dict[str, Any]) -> str:
    lines = []
    for i in range(len(result)):
        status = result.get(f"test.{i}.status")
        if status is None:
            break
        mark = "✅" if status == "pass" else "❌"
        lines.append(f"{mark} {result.get(f'test.{i}.spec', '<Error>')}")
    return "\n".join(lines) if lines else "❗ Could not find any test cases"


def benchmark_log(result: dict[str, Any]) -> str:
    lines = []
    for i in range(int(result.get("benchmark-count", 0))):
        base = f"benchmark.{i}"
        if result.get(f"{base}.status") == "fail":
            lines.append(f"❌ {result.get(f'{base}.spec')} failed testing")
            continue
        lines.append(f"{result.get(f'{base}.spec')} ⏱ {float(result.get(f'{base}.mean'))} ns")
    return "\n".join(lines) if lines else "❗ Could not find any benchmarks"


def as_flask_json(value: Any) -> Any:
    """What Flask's JSON provider sends for a value a query gave: a Decimal (numeric) becomes its string."""
    return json.loads(json.dumps(value, default=lambda v: str(v) if isinstance(v, decimal.Decimal) else v.isoformat()))


def ranking_worker_cycle(conn: psycopg.Connection) -> tuple[list[dict], list[dict]]:
    """ranking_worker.py: at start its table (CREATE TABLE IF NOT EXISTS, even for --dry-run), then one poll: the
    current top three of each running board's main GPU, the previous snapshot, the snapshot upserted and the rows
    of boards no longer running deleted. Answers (current, previous)."""
    with conn.cursor() as cur:
        cur.execute(kb.SNAPSHOT_TABLE)
    conn.commit()
    with conn.cursor() as cur:
        cur.execute(kb.TOP_THREE)
        names = [d[0] for d in cur.description]
        current = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
        cur.execute(kb.SNAPSHOT_READ)
        names = [d[0] for d in cur.description]
        previous = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    with conn.cursor() as cur:
        for entry in current:
            cur.execute(kb.SNAPSHOT_WRITE, (entry["leaderboard_id"], entry["gpu_type"], entry["rank"],
                                            entry["user_id"], entry["user_name"], entry["score"]))
    conn.commit()
    running = {entry["leaderboard_id"] for entry in current}
    gone = {entry["leaderboard_id"] for entry in previous} - running
    if gone:
        with conn.cursor() as cur:
            cur.execute(kb.SNAPSHOT_CLEANUP, (list(gone),))
        conn.commit()
    return current, previous
