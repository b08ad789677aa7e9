"""Kernelboard (gpumode.com) on this platform, unchanged: its queries against the `leaderboard` schema and what it does
with their rows (tests/support/kernelboard_site.py), its sign-in and web submission under the website's own database
role, and its ranking worker's table, over an imported upstream deployment."""

from __future__ import annotations

import asyncio
import uuid
from decimal import Decimal
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from problems import PROBLEMS_ROOT
from schemas.contracts import FullResult, SystemInfo
from schemas.events import RunCompleted
from services.kit.bus import publish_all
from tests.operate.conftest import GPU, mean_board, run_cli, stage, wait_rows
from tests.support import kernelboard_queries as kb
from tests.support import kernelboard_site as site
from tests.support.events import archived, query
from tests.support.platform import ADMIN_TOKEN, identity_board
from tests.support.upstream_db import CLI_IDS

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
CODE = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_bytes()


def kernelboard_sql(database_url: str, sql: str, params) -> list[tuple]:
    with psycopg.connect(database_url) as conn, conn.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall()


def by_score(entries: list[dict]) -> list[tuple]:
    return sorted((e["user_name"], e["score"], e["submission_id"], e["submission_count"]) for e in entries)


def as_role(database_url: str, role: str) -> str:
    parts = urlsplit(database_url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{role}@{host}"))


@pytest.fixture
def website(imported, database_url):
    """The website's role, made as docs/operations.md says (`kernelbot website-role`), and kernelboard's connection."""
    platform, _ = imported
    role = f"kb_site_{uuid.uuid4().hex[:10]}"
    run_cli(platform, "website-role", role)
    url = as_role(database_url, role)
    conn = site.connect(url)
    try:
        yield role, url, conn
    finally:
        conn.close()
        with psycopg.connect(database_url, autocommit=True) as admin:
            admin.execute(f"DROP OWNED BY {role}")
            admin.execute(f"DROP ROLE {role}")


def test_the_rankings_route_and_kernelboards_own_page_query_agree_with_the_ranking(imported, database_url):
    platform, ids = imported
    answer = platform.http.get(f"/leaderboard/{ids['matmul']}/rankings")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["leaderboard"] == {
        "name": "matmul", "deadline": "2100-01-01T00:00:00Z", "lang": "py", "description": "matmul description",
        "reference": "def ref(x):\n    return x\n", "benchmarks": [{"n": 64}], "gpu_types": ["A100", "H100"]}
    a100 = body["rankings"]["A100"]
    assert set(a100[0]) == {"user_name", "score", "file_name", "submission_id", "submission_count",
                            "submission_time"}
    served = platform.http.get("/submissions/matmul/A100").json()
    assert [(e["submission_id"], e["submission_score"]) for e in served] == [
        (e["submission_id"], e["score"]) for e in a100]
    assert by_score(a100) == [("alice", 0.0015, 114, 2), ("bob", 0.0015, 121, 3), ("carol", 0.003, 135, 2)]

    [(page,)] = kernelboard_sql(database_url, kb.LEADERBOARD_PAGE, {"leaderboard_id": ids["matmul"]})
    for gpu in ("A100", "H100"):
        assert by_score(page["rankings"][gpu]) == by_score(body["rankings"][gpu])
    assert page["leaderboard"]["reference"] == body["leaderboard"]["reference"]

    summaries = {row[0]["name"]: row[0] for row in kernelboard_sql(database_url, kb.SUMMARIES, ())}
    assert summaries["matmul"]["priority_gpu_type"] == "H100"
    assert [u["user_name"] for u in summaries["matmul"]["top_users"]] == [
        e["user_name"] for e in body["rankings"]["H100"]] == ["alice", "bob"]
    assert summaries["sorting-closed"]["visibility"] == "closed"

    # the trend charts: no hacked score, and scores of upstream's column type, which Flask sends as strings
    fastest = kernelboard_sql(database_url, kb.FASTEST_TREND, (ids["matmul"],))
    assert sorted(row[5] for row in fastest) == [Decimal(s) for s in ("0.001", "0.0012", "0.0015", "0.0015", "0.002",
                                                                         "0.003")]
    assert {type(score) for score in site.as_flask_json([row[5] for row in fastest])} == {str}

    assert platform.http.get("/leaderboard/999999/rankings").status_code == 404
    closed = f"/leaderboard/{ids['sorting-closed']}/rankings"
    assert platform.http.get(closed).status_code == 401
    assert platform.http.get(closed, headers={"X-Popcorn-Cli-Id": CLI_IDS["eve"]}).status_code == 403
    invited = platform.http.get(closed, headers={"X-Popcorn-Cli-Id": CLI_IDS["alice"]})
    assert [e["user_name"] for e in invited.json()["rankings"]["B200"]] == ["alice"]


def test_a_signed_in_users_submission_history_renders_as_kernelboard_renders_it(imported, website):
    _, ids = imported
    _, url, conn = website
    mine = site.submission_history(conn, ids["matmul"], "1001")  # kernelboard's 500 page when this raises
    assert [item["submission_id"] for item in mine] == [114, 107] and all(i["status"] == "succeeded" for i in mine)
    runs = {run["mode"]: run for run in mine[0]["runs"]}
    assert set(runs) == {"test", "benchmark", "leaderboard"}  # public runs only
    assert runs["leaderboard"]["score"] == 0.0015
    # the ranked stage's report lists its benchmarks, as on upstream's tables
    assert runs["leaderboard"]["report"]["log"].startswith("None ⏱ 1500000.0 ns")
    assert runs["test"]["report"]["log"] == "✅ <Error>"
    for user in ("gh-2002", "1003", "1004"):  # failed, unfinished and benchmark-only submissions too
        assert site.submission_history(conn, ids["matmul"], user)

    users = kernelboard_sql(url, kb.USER_SEARCH, (ids["matmul"], 20))
    assert {"1003", "1004"} <= {row[0] for row in users}  # users known by their submissions only
    codes = kernelboard_sql(url, kb.LIST_CODES, (ids["matmul"], [107, 198]))
    assert {row[0]: bytes(row[3]) for row in codes} == {107: b"print('a1')", 198: "print('\ufffd\ufffd')".encode()}
    assert kernelboard_sql(url, kb.IS_ENDED, (ids["old-cuda"],)) == [(True,)]
    assert kernelboard_sql(url, kb.IS_ENDED, (ids["matmul"],)) == [(False,)]


def test_sign_in_and_web_submission_work_with_kernelboards_own_writes(imported, website, database_url):
    platform, _ = imported
    _, url, conn = website
    # carol was imported without any id (Discord only): her first sign-in on the website writes a token
    _, name, token = site.sign_in(conn, "1003", "carol")
    assert name == "carol" and len(token) == 32
    assert site.sign_in(conn, "1003", "carol")[2] == token  # never replaced, as upstream
    answer = site.submit(conn, platform.http, "1003", "web-board", "null", "test", "submission.py", CODE)
    assert answer is not None and answer.status_code == 202, answer and answer.text
    owner = query(database_url, "SELECT user_id, user_name FROM submissions WHERE id = $1",
                  answer.json()["details"]["id"])
    assert owner == [{"user_id": "1003", "user_name": "carol"}]

    # someone the platform never saw signs in and submits: the website vouches for them, and they become a user
    # whom bans reach
    assert site.sign_in(conn, "424242", "newcomer")[1] == "newcomer"
    first = site.submit(conn, platform.http, "424242", "web-board", "null", "test", "submission.py", CODE)
    assert first is not None and first.status_code == 202, first and first.text
    assert query(database_url, "SELECT user_name FROM users WHERE user_id = '424242'") == [{"user_name": "newcomer"}]
    # carol was known by her submissions only: both were recorded, once each
    assert sorted(e["user_id"] for e in archived(database_url, "WebsiteUserSignedIn")) == ["1003", "424242"]
    assert platform.http.post("/admin/ban/424242", headers=ADMIN).status_code == 200
    banned = site.submit(conn, platform.http, "424242", "web-board", "null", "test", "submission.py", CODE)
    assert banned is not None and banned.status_code == 403, banned and banned.text

    # the website's web ids open the submit route only: not the user's submissions, code or deletions
    with conn.cursor() as cur:
        cur.execute(kb.USER_TOKEN, ("1003",))
        [(clear,)] = cur.fetchall()
    conn.commit()
    assert platform.http.get("/user/submissions", headers={"X-Web-Auth-Id": clear}).status_code == 401
    assert platform.http.post("/submission/web-board/null/test", headers={"X-Web-Auth-Id": "f" * 32},
                              files={"file": ("submission.py", CODE)}).status_code == 401
    # a user without a web id gets kernelboard's own error, and nothing reaches the API
    assert site.submit(conn, platform.http, "1001", "web-board", "null", "test", "submission.py", CODE) is None


def test_the_website_role_reads_the_schema_and_writes_only_what_sign_in_writes(website, database_url):
    _, url, conn = website
    refusals = [
        "UPDATE leaderboard.user_info SET user_name = 'mallory' WHERE id = '1001'",
        "UPDATE leaderboard.user_info SET is_banned = false WHERE id = '1006'",
        "INSERT INTO leaderboard.user_info (id, user_name, is_banned) VALUES ('666', 'x', false)",
        "DELETE FROM leaderboard.user_info WHERE id = '1001'",
        "UPDATE leaderboard.user_info SET web_auth_id_sha256 = 'x' WHERE id = '1001'",
        "SELECT web_auth_id_sha256 FROM leaderboard.user_info",
        "DELETE FROM leaderboard.submission WHERE id = 107",
        "SELECT count(*) FROM users",
        "SELECT count(*) FROM public.submissions",
        "DROP VIEW leaderboard.runs",
    ]
    for statement in refusals:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(statement)
        conn.rollback()
    assert conn.execute("SELECT count(*) FROM leaderboard.runs").fetchone()[0] > 0


def test_kernelboards_ranking_worker_keeps_its_table_under_the_website_role(imported, website):
    platform, ids = imported
    _, url, conn = website
    current, previous = site.ranking_worker_cycle(conn)
    assert previous == []
    top = {(e["leaderboard_id"], e["gpu_type"]): [] for e in current}
    for entry in current:
        top[(entry["leaderboard_id"], entry["gpu_type"])].append((entry["rank"], entry["user_name"], entry["score"]))
    ranked = platform.http.get(f"/leaderboard/{ids['matmul']}/rankings").json()["rankings"]["H100"]
    assert top[(ids["matmul"], "H100")] == [(rank, e["user_name"], Decimal(str(e["score"])))
                                             for rank, e in enumerate(ranked, start=1)]
    assert (ids["old-cuda"], "T4") not in top  # ended
    again, previous = site.ranking_worker_cycle(conn)  # the second start finds its table
    kept = ("leaderboard_id", "gpu_type", "rank", "user_id", "user_name", "score")
    assert again == current
    assert sorted(tuple(e[k] for k in kept) for e in previous) == sorted(tuple(e[k] for k in kept) for e in current)


def test_practice_boards_stay_off_the_website_unless_the_organiser_shows_them(imported, website, database_url):
    platform, ids = imported
    role, url, conn = website
    platform.add_boards(identity_board("scratch-py", ["null"]).model_copy(update={"practice": True}))
    practice = query(database_url, "SELECT id, name FROM leaderboards WHERE practice")
    assert practice and all(board["id"] >= 1_000_000_000 for board in practice)

    def website_boards() -> set[str]:
        rows = conn.execute("SELECT name FROM leaderboard.leaderboard").fetchall()
        conn.commit()
        return {name for (name,) in rows}

    assert website_boards() == {"matmul", "sorting-closed", "old-cuda", "web-board"}
    summaries = kernelboard_sql(url, kb.SUMMARIES, ())
    assert {row[0]["name"] for row in summaries} == website_boards()
    run_cli(platform, "website-role", role, "--practice-boards")
    shown = site.connect(url)
    try:
        names = {name for (name,) in shown.execute("SELECT name FROM leaderboard.leaderboard").fetchall()}
    finally:
        shown.close()
    assert {board["name"] for board in practice} <= names


def test_every_run_row_the_website_reads_has_its_own_id_a_profiles_cases_too(remote_platform, database_url):
    """A profile run stores one stage per benchmark case (`profile.0`, `profile.1`, ...), as upstream's runs table
    does; upstream gives each row its own id (a serial key), so the view must too."""
    platform = remote_platform
    platform.add_boards(mean_board("profiled"))
    cli = platform.register("81", "ada")
    answer = platform.submit(cli, "profiled", GPU, "profile", CODE.decode())
    assert answer.status_code == 202, answer.text
    submission_id = answer.json()["details"]["id"]
    platform.wait_for(lambda: archived(database_url, "RunRequested", str(submission_id)), "the profile run request")
    [run] = archived(database_url, "RunRequested", str(submission_id))
    cases = {f"profile.{i}": stage("benchmark", [1000.0 * (i + 1)]) for i in range(3)}
    asyncio.run(publish_all(platform.nats_url, [RunCompleted(
        run_id=run["run_id"], submission_id=submission_id, leaderboard="profiled", gpu=GPU, mode="profile",
        secret=False, ranking_by="mean", backend="remote", correlation_id=str(submission_id),
        result=FullResult(success=True, system=SystemInfo(gpu=GPU), runs=cases))]))
    wait_rows(database_url, f"SELECT count(*) AS n FROM leaderboard.runs WHERE submission_id = {submission_id}",
              [{"n": 3}])
    rows = query(database_url, "SELECT id, mode FROM leaderboard.runs WHERE submission_id = $1 ORDER BY mode",
                 submission_id)
    assert [row["mode"] for row in rows] == ["profile.0", "profile.1", "profile.2"]
    assert len({row["id"] for row in rows}) == 3, rows
    assert query(database_url, "SELECT count(*) = count(DISTINCT id) AS unique FROM leaderboard.runs") == [
        {"unique": True}]
