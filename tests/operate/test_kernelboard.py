"""Kernelboard (gpumode.com) on this platform: its rankings call, its SQL against the `leaderboard` views, and its
sign-in's web id through the admin route, over an imported upstream deployment."""

from __future__ import annotations

import psycopg
import pytest

from problems import PROBLEMS_ROOT
from tests.operate.conftest import run_cli
from tests.support import kernelboard_queries as kb
from tests.support.events import archived, query
from tests.support.in_process import InProcessPlatform
from tests.support.platform import ADMIN_TOKEN, identity_board
from tests.support.upstream_db import CLI_IDS, SUBMISSIONS, WEB_IDS

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
CODE = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_text()


def kernelboard_sql(database_url: str, sql: str, params) -> list[tuple]:
    with psycopg.connect(database_url) as conn, conn.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall()


def by_score(entries: list[dict]) -> list[tuple]:
    return sorted((e["user_name"], e["score"], e["submission_id"], e["submission_count"]) for e in entries)


@pytest.fixture
def imported(nats_url, database_url, upstream_url, tmp_path):
    platform = InProcessPlatform(nats_url, database_url, tmp_path, null_gpus=("null",))
    platform.start()
    try:
        platform.add_boards(identity_board("web-board", ["null"]))
        run_cli(platform, "import-upstream", upstream_url, "--report", str(tmp_path / "report.txt"))
        platform.wait_for(lambda: len(archived(database_url, "SubmissionFinished")) == len(SUBMISSIONS),
                          "the imported history to be projected")
        yield platform, {r["name"]: r["id"] for r in query(database_url, "SELECT id, name FROM leaderboards")}
    finally:
        platform.stop()


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
    # the ranking /submissions serves; counts as upstream counts (every submission with a run on the GPU)
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

    fastest = kernelboard_sql(database_url, kb.FASTEST_TREND, (ids["matmul"],))
    assert sorted(row[5] for row in fastest) == [0.001, 0.0012, 0.0015, 0.0015, 0.002, 0.003]  # no hacked score

    assert platform.http.get("/leaderboard/999999/rankings").status_code == 404
    closed = f"/leaderboard/{ids['sorting-closed']}/rankings"
    assert platform.http.get(closed).status_code == 401
    assert platform.http.get(closed, headers={"X-Popcorn-Cli-Id": CLI_IDS["eve"]}).status_code == 403
    invited = platform.http.get(closed, headers={"X-Popcorn-Cli-Id": CLI_IDS["alice"]})
    assert [e["user_name"] for e in invited.json()["rankings"]["B200"]] == ["alice"]


def test_kernelboards_reads_run_on_the_views_and_its_writes_are_refused(imported, database_url):
    platform, ids = imported
    users = kernelboard_sql(database_url, kb.USER_SEARCH, (ids["matmul"], 20))
    assert {"1003", "1004"} <= {row[0] for row in users}  # users known by their submissions only

    mine = kernelboard_sql(database_url, kb.LIST_SUBMISSIONS, (ids["matmul"], "1001", 20, 0))
    assert [row[0] for row in mine] == [114, 107] and all(row[5] == "succeeded" for row in mine)
    stages = {run["mode"]: run for run in mine[0][9]}
    assert set(stages) == {"test", "benchmark", "leaderboard"}  # public runs only
    assert stages["leaderboard"]["score"] == 0.0015 and stages["leaderboard"]["result"] == {}
    assert stages["test"]["result"]["test.0.status"] == "pass"

    codes = kernelboard_sql(database_url, kb.LIST_CODES, (ids["matmul"], [107, 198]))
    assert {row[0]: bytes(row[3]) for row in codes} == {107: b"print('a1')",
                                                        198: "print('\ufffd\ufffd')".encode()}
    assert kernelboard_sql(database_url, kb.IS_ENDED, (ids["old-cuda"],)) == [(True,)]
    assert kernelboard_sql(database_url, kb.IS_ENDED, (ids["matmul"],)) == [(False,)]

    with pytest.raises(psycopg.Error) as refused:
        kernelboard_sql(database_url, kb.ENSURE_WEB_ID, ("1003", "carol", "a-token-kernelboard-made"))
    assert "web_auth_id" in str(refused.value) or "read-only" in str(refused.value)
    with pytest.raises(psycopg.errors.UndefinedColumn):  # no credential can be read through a view
        kernelboard_sql(database_url, kb.USER_TOKEN, ("1001",))
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="read-only view"):
        kernelboard_sql(database_url, "DELETE FROM leaderboard.submission WHERE id = %s", (107,))


def test_kernelboards_sign_in_sets_a_web_id_through_the_admin_route_and_submits_with_it(imported, database_url):
    platform, _ = imported
    route = "/admin/users/{}/web-auth-id"
    # a user imported without any id (Discord only) signs in on the website for the first time
    answer = platform.http.put(route.format("1003"), json={"user_name": "carol"}, headers=ADMIN)
    assert answer.status_code == 200, answer.text
    carol = answer.json()["web_auth_id"]
    platform.wait_for(lambda: platform.http.get("/user/submissions", headers={"X-Web-Auth-Id": carol}
                                                ).status_code == 200, "carol's web id")
    submitted = platform.http.post("/submission/web-board/null/test", headers={"X-Web-Auth-Id": carol},
                                   files={"file": ("submission.py", CODE.encode())})
    assert submitted.status_code == 202, submitted.text
    owner = query(database_url, "SELECT user_id FROM submissions WHERE id = $1", submitted.json()["details"]["id"])
    assert owner == [{"user_id": "1003"}]

    # a new sign-in replaces the web id; the CLI id stays
    chosen = "kernelboard-token-for-alice-0001"
    assert platform.http.put(route.format("1001"), json={"user_name": "alice", "web_auth_id": chosen},
                             headers=ADMIN).json()["web_auth_id"] == chosen
    platform.wait_for(lambda: platform.http.get("/user/submissions", headers={"X-Web-Auth-Id": chosen}
                                                ).status_code == 200, "alice's new web id")
    assert platform.http.get("/user/submissions", headers={"X-Web-Auth-Id": WEB_IDS["alice"]}).status_code == 401
    assert platform.http.get("/user/submissions", headers={"X-Popcorn-Cli-Id": CLI_IDS["alice"]}).status_code == 200
    assert query(database_url, "SELECT user_name FROM users WHERE user_id = '1001'") == [{"user_name": "alice"}]

    for body, status in (({"user_name": "eve", "web_auth_id": chosen}, 400),  # alice's
                         ({"user_name": "eve", "web_auth_id": "short"}, 400), ({}, 400)):
        assert platform.http.put(route.format("1006"), json=body, headers=ADMIN).status_code == status
    assert platform.http.put(route.format("1006"), json={"user_name": "eve"}).status_code == 401
