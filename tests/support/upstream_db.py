"""A database shaped as an upstream KernelBot deployment's, for `kernelbot import-upstream` and kernelboard's queries.

The schema is the `leaderboard` schema as upstream's migrations leave it (written here from what they do: tables,
columns, keys and cascades), and the rows hold every kind the importer meets, odd ones included.
"""

from __future__ import annotations

import asyncio
import json

import asyncpg

SCHEMA = """
CREATE SCHEMA leaderboard;
CREATE TABLE leaderboard.leaderboard (
    id SERIAL PRIMARY KEY, name TEXT UNIQUE NOT NULL, deadline TIMESTAMPTZ NOT NULL, task JSONB NOT NULL,
    creator_id BIGINT NOT NULL DEFAULT -1, forum_id BIGINT NOT NULL, description TEXT NOT NULL,
    secret_seed BIGINT NOT NULL DEFAULT floor(random() * 2147483648), visibility TEXT NOT NULL DEFAULT 'public');
CREATE TABLE leaderboard.gpu_type (
    leaderboard_id INTEGER NOT NULL REFERENCES leaderboard.leaderboard(id) ON DELETE CASCADE,
    gpu_type TEXT NOT NULL, PRIMARY KEY (leaderboard_id, gpu_type));
CREATE TABLE leaderboard.templates (
    id SERIAL PRIMARY KEY, leaderboard_id INTEGER NOT NULL REFERENCES leaderboard.leaderboard(id),
    lang TEXT NOT NULL, code TEXT NOT NULL);
CREATE TABLE leaderboard.user_info (
    id TEXT PRIMARY KEY, user_name TEXT, cli_id VARCHAR(255), cli_valid BOOLEAN DEFAULT false,
    cli_auth_provider VARCHAR(255), created_at TIMESTAMP DEFAULT now(), web_auth_id VARCHAR(255),
    is_banned BOOLEAN NOT NULL DEFAULT false);
CREATE TABLE leaderboard.code_files (
    id SERIAL PRIMARY KEY, old_code TEXT, code BYTEA NOT NULL,
    hash TEXT GENERATED ALWAYS AS (encode(sha256(code), 'hex')) STORED NOT NULL UNIQUE);
CREATE TABLE leaderboard.submission (
    id SERIAL PRIMARY KEY, leaderboard_id INTEGER NOT NULL REFERENCES leaderboard.leaderboard(id),
    file_name TEXT NOT NULL, user_id TEXT NOT NULL REFERENCES leaderboard.user_info(id),
    code_id INTEGER NOT NULL REFERENCES leaderboard.code_files(id), submission_time TIMESTAMPTZ NOT NULL,
    done BOOLEAN DEFAULT false, status TEXT NOT NULL DEFAULT 'active', mode_category TEXT);
CREATE TABLE leaderboard.runs (
    id SERIAL PRIMARY KEY, submission_id INTEGER NOT NULL REFERENCES leaderboard.submission(id),
    start_time TIMESTAMPTZ NOT NULL, end_time TIMESTAMPTZ NOT NULL, mode TEXT NOT NULL, secret BOOLEAN NOT NULL,
    runner TEXT NOT NULL, score NUMERIC, passed BOOLEAN NOT NULL, compilation JSONB, meta JSONB, result JSONB,
    system_info JSONB NOT NULL);
CREATE TABLE leaderboard.submission_job_status (
    id SERIAL PRIMARY KEY,
    submission_id INTEGER NOT NULL UNIQUE REFERENCES leaderboard.submission(id) ON DELETE CASCADE,
    status VARCHAR(255), error TEXT, created_at TIMESTAMPTZ NOT NULL DEFAULT now(), last_heartbeat TIMESTAMPTZ);
CREATE TABLE leaderboard.draft_code (
    id SERIAL PRIMARY KEY,
    leaderboard_id INTEGER NOT NULL REFERENCES leaderboard.leaderboard(id) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES leaderboard.user_info(id) ON DELETE CASCADE, type TEXT NOT NULL DEFAULT 'general',
    code BYTEA NOT NULL, created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_modified_at TIMESTAMPTZ NOT NULL DEFAULT now());
CREATE TABLE leaderboard.leaderboard_invite (
    id SERIAL PRIMARY KEY, code TEXT NOT NULL UNIQUE, user_id TEXT, claimed_at TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now());
CREATE TABLE leaderboard.leaderboard_invite_scope (
    invite_id INTEGER NOT NULL REFERENCES leaderboard.leaderboard_invite(id) ON DELETE CASCADE,
    leaderboard_id INTEGER NOT NULL REFERENCES leaderboard.leaderboard(id) ON DELETE CASCADE,
    PRIMARY KEY (invite_id, leaderboard_id));
CREATE TABLE leaderboard.rate_limit (
    id SERIAL PRIMARY KEY,
    leaderboard_id INTEGER NOT NULL REFERENCES leaderboard.leaderboard(id) ON DELETE CASCADE,
    mode_category TEXT NOT NULL CHECK (mode_category IN ('test', 'leaderboard')),
    max_submissions_per_hour INTEGER NOT NULL CHECK (max_submissions_per_hour >= 0),
    UNIQUE (leaderboard_id, mode_category));
"""

# Upstream's ranking of a board's GPU (its `show` query): each user's best public score, where a secret leaderboard
# run on the same GPU passed and none failed, leaving out submissions marked hacked; RANK() over the scores.
UPSTREAM_RANKING = """
WITH best_submissions AS (
    SELECT DISTINCT ON (s.user_id) s.id AS submission_id, s.user_id, r.score, r.runner
    FROM leaderboard.runs r
    JOIN leaderboard.submission s ON r.submission_id = s.id
    JOIN leaderboard.leaderboard l ON s.leaderboard_id = l.id
    JOIN leaderboard.user_info ui ON s.user_id = ui.id
    WHERE l.name = $1 AND r.runner = $2 AND NOT r.secret AND r.score IS NOT NULL AND r.passed
      AND s.status <> 'hacked'
      AND NOT EXISTS (SELECT 1 FROM leaderboard.submission_job_status sjs
                      WHERE sjs.submission_id = s.id AND sjs.status = 'hacked')
      AND EXISTS (SELECT 1 FROM leaderboard.runs sr WHERE sr.submission_id = s.id AND sr.secret
                  AND sr.runner = r.runner AND sr.mode = 'leaderboard' AND sr.passed)
      AND NOT EXISTS (SELECT 1 FROM leaderboard.runs sr WHERE sr.submission_id = s.id AND sr.secret
                      AND sr.runner = r.runner AND sr.passed = FALSE)
    ORDER BY s.user_id, r.score ASC)
SELECT bs.user_id, ui.user_name, bs.score::float8 AS score, RANK() OVER (ORDER BY bs.score ASC) AS rank
FROM best_submissions bs JOIN leaderboard.user_info ui ON bs.user_id = ui.id
ORDER BY bs.score ASC, bs.user_id
"""

PY_TASK = {
    "lang": "py", "files": {"eval.py": "# harness\n", "reference.py": "def ref(x):\n    return x\n",
                            "submission.py": "@SUBMISSION@"},
    "config": {"main": "eval.py"}, "libraries": [], "tests": [{"n": 1}], "test_timeout": 120,
    "benchmarks": [{"n": 64}], "benchmark_timeout": 180, "ranked_timeout": 420, "ranking_by": "geom", "seed": None,
    "multi_gpu": False}
CU_TASK = {
    "lang": "cu", "files": {"eval.cu": "// harness\n", "reference.cuh": "// ref\n", "submission.cu": "@SUBMISSION@"},
    "config": {"sources": ["eval.cu", "submission.cu"], "include_dirs": [], "defines": {}, "compile_flags": []},
    "tests": [{"n": 1}], "benchmarks": [{"n": 8}], "ranking_by": "last"}
SYSTEM = {"gpu": "NVIDIA A100-SXM4-80GB", "device_count": 1, "cpu": "AMD EPYC", "platform": "Linux", "torch": "2.6",
          "runtime": "CUDA"}
CLI_IDS = {"alice": "cli-alice-0123456789", "bob": "cli-bob-0123456789", "eve": "cli-eve-0123456789",
           "nameless": "cli-half-done"}
WEB_IDS = {"alice": "web-alice-abcdef", "dave": "web-dave-abcdef"}

# (id, name, cli id, cli valid, provider, web id, banned)
USERS = [
    ("1001", "alice", CLI_IDS["alice"], True, "discord", WEB_IDS["alice"], False),
    ("gh-2002", "bob", CLI_IDS["bob"], True, "github", None, False),
    ("1003", "carol", None, False, None, None, False),  # Discord only: no CLI id
    ("1004", None, CLI_IDS["nameless"], False, None, None, False),  # no name; sign-in never finished
    ("1005", "dave", None, False, None, WEB_IDS["dave"], True),  # website only, banned
    ("1006", "eve", CLI_IDS["eve"], True, None, None, True),
    ("1007", "frank", None, False, None, None, True),  # banned, nothing to sign in with
]


def stages(gpu: str, secret: bool, score: float | None, *, passed: bool = True, ranked: bool = True) -> list[tuple]:
    """Run rows of one run: (mode, secret, runner, score, passed, result)."""
    test = ("test", secret, gpu, None, passed, {"test-count": "1", "test.0.status": "pass" if passed else "fail"})
    if not ranked:
        return [test]
    mean = {"benchmark-count": "1", "benchmark.0.mean": str((score or 1.0) * 1e9)}
    rows = [test, ("benchmark", secret, gpu, None, passed, mean)] if not secret else [test]
    return rows + [("leaderboard", secret, gpu, score if passed else None, passed, mean)]


def ranked(gpu: str, score: float, secret_passes: bool = True, secret_score: float | None = None) -> list[tuple]:
    return stages(gpu, False, score) + stages(gpu, True, secret_score or score * 1.01, passed=secret_passes)


def secret_test_fails(gpu: str, score: float) -> list[tuple]:
    """A run whose secret leaderboard stage passed but whose secret test stage failed: upstream does not rank it
    (no secret run on the GPU may fail, whatever its stage), though a passed secret leaderboard run exists."""
    test, leaderboard = stages(gpu, True, score * 1.01)
    return stages(gpu, False, score) + [(*test[:4], False, {"test-count": "1", "test.0.status": "fail"}), leaderboard]


# (board, user, file, code, minute, done, status, job status, job error, mode category, runs)
SUBMISSIONS = [
    ("matmul", "1001", "a1.py", b"print('a1')", 1, True, "active", "succeeded", None, "leaderboard",
     ranked("A100", 0.002) + ranked("H100", 0.001)),
    ("matmul", "1001", "a2.py", b"print('a2')", 2, True, "active", "succeeded", None, "leaderboard",
     ranked("A100", 0.0015)),
    ("matmul", "gh-2002", "b1.py", b"print('b1')", 3, True, "active", "succeeded", None, "leaderboard",
     ranked("A100", 0.0015) + ranked("H100", 0.0012)),
    ("matmul", "1003", "c1.py", b"print('c1')", 4, True, "active", "failed", "secret validation failed", "leaderboard",
     ranked("A100", 0.001, secret_passes=False)),
    ("matmul", "1003", "c2.py", b"print('c2')", 5, True, "active", "succeeded", None, "leaderboard",
     ranked("A100", 0.003)),
    ("matmul", "1005", "d1.py", b"print('d1')", 6, True, "hacked", None, None, "leaderboard",
     ranked("A100", 0.0001)),
    ("matmul", "1006", "e1.py", b"print('e1')", 7, True, "active", "hacked", "timing tampered", "leaderboard",
     ranked("A100", 0.0002)),
    ("matmul", "gh-2002", "t.py", b"print('t')", 8, True, "active", "failed", "1/1 tests failed", "test",
     stages("A100", False, None, passed=False, ranked=False)),
    ("matmul", "1004", "bench.py", b"print('bench')", 9, True, "active", "succeeded", None, None,
     stages("A100", False, None, ranked=False) + [("benchmark", False, "A100", None, True, {"benchmark-count": "0"})]),
    ("matmul", "1003", "late.py", b"print('late')", 10, False, "active", None, None, "leaderboard", []),
    ("matmul", "gh-2002", "b2.py", b"print('b2')", 11, True, "active", "failed", None, "leaderboard",
     stages("H100", False, 0.0009)),  # no secret run: not ranked
    ("sorting-closed", "1001", "s.py", b"print('s')", 12, True, "active", "succeeded", None, "leaderboard",
     ranked("B200", 0.5)),
    ("old-cuda", "gh-2002", "k.cu", b"__global__ void k() {}", 13, True, "active", "succeeded", None, "leaderboard",
     ranked("T4", 0.01)),
    ("matmul", "gh-2002", "bytes.py", b"print('\xff\xfe')", 14, True, "active", "succeeded", None, "test",
     stages("A100", False, None, ranked=False)),
    # the fastest on T4 if a failed secret test stage were overlooked; upstream's job said succeeded, so only the
    # ranking rule itself leaves it out
    ("old-cuda", "1003", "c.cu", b"__global__ void c() {}", 15, True, "active", "succeeded", None, "leaderboard",
     secret_test_fails("T4", 0.005)),
    # hacked, by a user who is not banned: only the hacked mark keeps it off the board
    ("old-cuda", "1001", "a.cu", b"__global__ void a() {}", 16, True, "hacked", "hacked", "timing tampered",
     "leaderboard", ranked("T4", 0.001)),
]


# Upstream's board ids, as a deployment that deleted and recreated boards leaves them: not 1..n, nor in name order.
# 1 and 2 are free, so a platform's own first boards do not collide with them; 6 belonged to a board deleted since.
BOARD_IDS = {"matmul": 3, "sorting-closed": 8, "old-cuda": 5, "gone": 6}


async def _fill(conn: asyncpg.Connection) -> None:
    await conn.execute(SCHEMA)
    boards = {}
    for name, task, deadline, visibility, gpus, forum in (
            ("matmul", PY_TASK, "2100-01-01T00:00:00+00", "public", ["A100", "H100"], 555),
            ("sorting-closed", PY_TASK, "2100-01-01T00:00:00+00", "closed", ["B200"], 556),
            ("old-cuda", CU_TASK, "2025-03-01T00:00:00+00", "public", ["T4"], 557),
            ("gone", PY_TASK, "2100-01-01T00:00:00+00", "closed", ["A100"], 558)):
        boards[name] = await conn.fetchval(
            "INSERT INTO leaderboard.leaderboard (id, name, deadline, task, creator_id, forum_id, description, "
            "secret_seed, visibility) VALUES ($1, $2, $3::text::timestamptz, $4::text::jsonb, 42, $5, $6, 4242, $7) "
            "RETURNING id", BOARD_IDS[name], name, deadline, json.dumps(task), forum, f"{name} description",
            visibility)
        for gpu in gpus:
            await conn.execute("INSERT INTO leaderboard.gpu_type VALUES ($1, $2)", boards[name], gpu)
    await conn.execute("SELECT setval('leaderboard.leaderboard_id_seq', $1)", max(BOARD_IDS.values()))
    await conn.execute("INSERT INTO leaderboard.templates (leaderboard_id, lang, code) VALUES ($1, 'Python', $2)",
                       boards["matmul"], "def custom_kernel(x):\n    return x\n")
    for user in USERS:
        await conn.execute("INSERT INTO leaderboard.user_info (id, user_name, cli_id, cli_valid, cli_auth_provider, "
                           "web_auth_id, is_banned) VALUES ($1, $2, $3, $4, $5, $6, $7)", *user)
    for number, (board, user, file, code, minute, done, status, job, error, category, runs) in enumerate(
            SUBMISSIONS, start=1):
        code_id = await conn.fetchval("INSERT INTO leaderboard.code_files (code) VALUES ($1) RETURNING id", code)
        at = f"2026-01-0{1 + number % 3}T10:{minute:02d}:00+00"
        sid = await conn.fetchval(
            "INSERT INTO leaderboard.submission (id, leaderboard_id, file_name, user_id, code_id, submission_time, "
            "done, status, mode_category) VALUES ($1, $2, $3, $4, $5, $6::text::timestamptz, $7, $8, $9) RETURNING id",
            100 + number * 7, boards[board], file, user, code_id, at, done, status, category)
        if job:
            await conn.execute("INSERT INTO leaderboard.submission_job_status (submission_id, status, error) "
                               "VALUES ($1, $2, $3)", sid, job, error)
        for mode, secret, gpu, score, passed, result in runs:
            meta = {"stdout": f"{mode} ok", "stderr": "", "success": True, "exit_code": 0, "command": "python eval.py",
                    "duration": 1.5}
            await conn.execute(
                "INSERT INTO leaderboard.runs (submission_id, start_time, end_time, mode, secret, runner, score, "
                "passed, compilation, meta, result, system_info) VALUES ($1, $2::text::timestamptz, "
                "$2::text::timestamptz + interval '1 minute', $3, $4, $5, $6, $7, NULL, $8::text::jsonb, "
                "$9::text::jsonb, $10::text::jsonb)",
                sid, at, mode, secret, gpu, score, passed, json.dumps(meta), json.dumps(result), json.dumps(SYSTEM))
    # a board deleted with force, as upstream deletes one: its runs, submissions, templates, then the board (its GPU
    # types, invite scopes and rate limits cascade); its code and an invite that covered only it stay behind
    gone_code = await conn.fetchval("INSERT INTO leaderboard.code_files (code) VALUES ('x = 1') RETURNING id")
    gone_sub = await conn.fetchval(
        "INSERT INTO leaderboard.submission (leaderboard_id, file_name, user_id, code_id, submission_time) "
        "VALUES ($1, 'g.py', '1001', $2, now()) RETURNING id", boards["gone"], gone_code)
    invites = {"CLOSED-ALICE": ("1001", ["sorting-closed"]), "CLOSED-OPEN": (None, ["sorting-closed"]),
               "BOTH-BOB": ("gh-2002", ["sorting-closed", "old-cuda"]), "GONE-ONLY": (None, ["gone"])}
    for code, (user, scope) in invites.items():
        invite = await conn.fetchval(
            "INSERT INTO leaderboard.leaderboard_invite (code, user_id, claimed_at, created_at) VALUES "
            "($1, $2, CASE WHEN $2::text IS NULL THEN NULL ELSE '2026-01-02T00:00:00+00'::timestamptz END, "
            "'2026-01-01T00:00:00+00') RETURNING id", code, user)
        for name in scope:
            await conn.execute("INSERT INTO leaderboard.leaderboard_invite_scope VALUES ($1, $2)", invite, boards[name])
    for board, category, limit in (("matmul", "test", 10), ("matmul", "leaderboard", 0), ("gone", "test", 3)):
        await conn.execute("INSERT INTO leaderboard.rate_limit (leaderboard_id, mode_category, "
                           "max_submissions_per_hour) VALUES ($1, $2, $3)", boards[board], category, limit)
    await conn.execute("INSERT INTO leaderboard.draft_code (leaderboard_id, user_id, code) VALUES ($1, '1001', 'x')",
                       boards["matmul"])
    await conn.execute("DELETE FROM leaderboard.runs WHERE submission_id = $1", gone_sub)
    await conn.execute("DELETE FROM leaderboard.submission WHERE leaderboard_id = $1", boards["gone"])
    await conn.execute("DELETE FROM leaderboard.templates WHERE leaderboard_id = $1", boards["gone"])
    await conn.execute("DELETE FROM leaderboard.leaderboard WHERE id = $1", boards["gone"])


def create_upstream(url: str) -> None:
    async def run() -> None:
        conn = await asyncpg.connect(url)
        try:
            await _fill(conn)
        finally:
            await conn.close()

    asyncio.run(run())


def upstream_ranking(url: str, board: str, gpu: str) -> list[dict]:
    async def run() -> list[dict]:
        conn = await asyncpg.connect(url)
        try:
            return [dict(r) for r in await conn.fetch(UPSTREAM_RANKING, board, gpu)]
        finally:
            await conn.close()

    return asyncio.run(run())
