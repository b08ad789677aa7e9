"""SQL of the scorer's best table, scorer_best: each (board, GPU, user)'s best score that still stands.

A new score only adds: the user's best becomes it when it is better, whatever the user's history (`improve`, one
statement of constant cost). Anything that takes a score away or makes it worse (a revision, a deletion) recomputes
the keys it touched from what the ledger's standings are computed from: the scores the scorer published
(scorer_scores mirrors the ledger's `scores`) and the fate of their submissions, by the rules of
services/ranking/rules.py (the very statement shape of services/ledger/standings_sql.py). So the two agree, and a user
whose best leaves the board (deleted, its board deleted, its score withdrawn) stands again with their next best.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence

import asyncpg

from schemas.envelope import Event
from schemas.events import ScoreComputed
from schemas.operations_events import ScoreRevised
from services.ranking.rules import SUBMISSION_STANDS, best_first, better_than

# Each submission's fate, in the columns the shared rule (SUBMISSION_STANDS) reads: `status` is `hacked` while the
# pre-check holds it so; `deleted` when it was deleted, or made to a board until that board's deletion.
FATES = """(
    SELECT sub.submission_id, CASE WHEN sub.precheck_hold = 'hacked' THEN 'hacked' ELSE 'judged' END AS status,
           EXISTS (SELECT 1 FROM scorer_deleted d WHERE d.submission_id = sub.submission_id)
           OR EXISTS (SELECT 1 FROM scorer_board_deletions b
                      WHERE lower(b.leaderboard) = lower(sub.leaderboard) AND b.deleted_at >= sub.submitted_at)
           AS deleted
    FROM scorer_submissions sub)"""
# As the ledger applies them (score_insert, score_revise): the first computed score stays; a revision replaces it, and
# a revision to no score withdraws it.
SCORE_COMPUTED = """
INSERT INTO scorer_scores (submission_id, gpu, leaderboard, user_id, user_name, score, submitted_at)
VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (submission_id, gpu) DO NOTHING
"""
SCORE_REVISED = """
WITH withdrawn AS (DELETE FROM scorer_scores WHERE submission_id = $1 AND gpu = $2 AND $6::float8 IS NULL)
INSERT INTO scorer_scores (submission_id, gpu, leaderboard, user_id, user_name, score, submitted_at)
SELECT $1, $2, $3, $4, $5, $6, $7 WHERE $6::float8 IS NOT NULL
ON CONFLICT (submission_id, gpu) DO UPDATE SET score = EXCLUDED.score
"""
# The best standing score of each key given ($1, $2, $3: boards, GPUs, users); a key with none leaves the table.
REFRESH = f"""
WITH keys AS (
    SELECT DISTINCT leaderboard, gpu, user_id
    FROM unnest($1::text[], $2::text[], $3::text[]) AS k(leaderboard, gpu, user_id)
), best AS (
    SELECT DISTINCT ON (sc.leaderboard, sc.gpu, sc.user_id)
           sc.leaderboard, sc.gpu, sc.user_id, sc.user_name, sc.score, sc.submission_id, sc.submitted_at
    FROM keys k
    JOIN scorer_scores sc ON sc.leaderboard = k.leaderboard AND sc.gpu = k.gpu AND sc.user_id = k.user_id
    JOIN {FATES} s ON s.submission_id = sc.submission_id
    WHERE {SUBMISSION_STANDS}
    ORDER BY sc.leaderboard, sc.gpu, sc.user_id, {best_first("sc")}
), removed AS (
    DELETE FROM scorer_best b USING keys k
    WHERE b.leaderboard = k.leaderboard AND b.gpu = k.gpu AND b.user_id = k.user_id
      AND NOT EXISTS (SELECT 1 FROM best WHERE best.leaderboard = k.leaderboard AND best.gpu = k.gpu
                                           AND best.user_id = k.user_id)
)
INSERT INTO scorer_best AS b (leaderboard, gpu, user_id, user_name, score, submission_id, submitted_at)
SELECT leaderboard, gpu, user_id, user_name, score, submission_id, submitted_at FROM best
ON CONFLICT (leaderboard, gpu, user_id) DO UPDATE
SET user_name = EXCLUDED.user_name, score = EXCLUDED.score, submission_id = EXCLUDED.submission_id,
    submitted_at = EXCLUDED.submitted_at
"""
# A computed score kept (the first one only, as SCORE_COMPUTED) and, when its submission stands, made its user's best
# if it is better than the best held: the ledger's "only adds" case, without reading the user's other scores.
IMPROVE = f"""
WITH kept AS (
    INSERT INTO scorer_scores (submission_id, gpu, leaderboard, user_id, user_name, score, submitted_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (submission_id, gpu) DO NOTHING
    RETURNING submission_id, gpu, leaderboard, user_id, user_name, score, submitted_at
)
INSERT INTO scorer_best AS b (leaderboard, gpu, user_id, user_name, score, submission_id, submitted_at)
SELECT sc.leaderboard, sc.gpu, sc.user_id, sc.user_name, sc.score, sc.submission_id, sc.submitted_at
FROM kept sc JOIN {FATES} s ON s.submission_id = sc.submission_id
WHERE {SUBMISSION_STANDS}
ON CONFLICT (leaderboard, gpu, user_id) DO UPDATE
SET user_name = EXCLUDED.user_name, score = EXCLUDED.score, submission_id = EXCLUDED.submission_id,
    submitted_at = EXCLUDED.submitted_at
WHERE {better_than("EXCLUDED", "b")}
RETURNING 1
"""
# Two judgings of one user's submissions at once would each refresh from what it sees, and the later would overwrite
# the other's better score: a refresh holds its keys (in one order, with the table first, as a rescore takes it).
# Two new #1s judged at once would each read the board's top before the other's commit, and each announce that it took
# #1 from the old one: a new score's judging also holds its board, from the top it reads before to its commit.
# The lock numbers are computed here (lock_number), so a judging takes the table, its board and its key in one round
# trip.
LOCK_TABLE = "LOCK TABLE scorer_best IN ROW EXCLUSIVE MODE"
KEY_LOCK, BOARD_LOCK = 8232, 8233
KEY_LOCKS = f"""
SELECT count(pg_advisory_xact_lock({KEY_LOCK}, n)) FROM (SELECT DISTINCT unnest($1::int[]) AS n ORDER BY n) AS held
"""
SUBMISSION_KEYS = "SELECT DISTINCT leaderboard, gpu, user_id FROM scorer_scores WHERE submission_id = $1"
# Removing submissions can only take rows away or put a user's other score in their place: the rows there are the keys.
BOARD_KEYS = "SELECT leaderboard, gpu, user_id FROM scorer_best WHERE lower(leaderboard) = lower($1)"
BOARD_GPU_KEYS = """
SELECT leaderboard, gpu, user_id FROM scorer_scores WHERE leaderboard = $1 AND gpu = $2
UNION SELECT leaderboard, gpu, user_id FROM scorer_best WHERE leaderboard = $1 AND gpu = $2
"""
DELETE_SUBMISSION = "INSERT INTO scorer_deleted (submission_id) VALUES ($1) ON CONFLICT DO NOTHING"
DELETE_BOARD = "INSERT INTO scorer_board_deletions (leaderboard, deleted_at) VALUES ($1, $2) ON CONFLICT DO NOTHING"

Key = tuple[str, str, str]  # (leaderboard, gpu, user_id)


async def record(conn: asyncpg.Connection, events: Iterable[Event]) -> list[Key]:
    """Keep the scores among `events` (what the scorer publishes), in order; the keys they touch."""
    keys: list[Key] = []
    for event in events:
        if isinstance(event, ScoreComputed):
            await conn.execute(SCORE_COMPUTED, event.submission_id, event.gpu, event.leaderboard, event.user_id,
                               event.user_name, event.score, event.submitted_at)
        elif isinstance(event, ScoreRevised):
            await conn.execute(SCORE_REVISED, event.submission_id, event.gpu, event.leaderboard, event.user_id,
                               event.user_name, event.score, event.submitted_at)
        else:
            continue
        keys.append((event.leaderboard, event.gpu, event.user_id))
    return keys


async def hold(conn: asyncpg.Connection, event: ScoreComputed) -> None:
    """Hold the score's board against another new score's judging, and its key against a refresh, until this
    transaction ends."""
    board = lock_number(event.leaderboard, event.gpu)
    key = lock_number(event.leaderboard, event.gpu, event.user_id)
    # numbers made here, not text a user chose: one simple-protocol round trip for the three locks
    await conn.execute(f"{LOCK_TABLE}; SELECT pg_advisory_xact_lock({BOARD_LOCK}, {board}), "
                       f"pg_advisory_xact_lock({KEY_LOCK}, {key})")


async def improve(conn: asyncpg.Connection, event: ScoreComputed, *, held: bool = False) -> bool:
    """Keep a computed score and make it its user's best when it is: whether the best table changed. `held`: the
    caller took `hold` already."""
    if not held:
        await hold(conn, event)
    return await conn.fetchval(IMPROVE, event.submission_id, event.gpu, event.leaderboard, event.user_id,
                               event.user_name, event.score, event.submitted_at) is not None


async def refresh(conn: asyncpg.Connection, keys: Sequence[Key]) -> None:
    if keys:
        await _lock(conn, keys)
        await conn.execute(REFRESH, *_columns(keys))


def lock_number(*parts: str) -> int:
    """An advisory lock's number for these parts, the same in every process (Python's hash() of text is salted per
    process), in Postgres's int4 range."""
    return zlib.crc32("\x01".join(parts).encode()) - 2**31


def _columns(keys: Sequence[Key]) -> tuple[list[str], list[str], list[str]]:
    return [k[0] for k in keys], [k[1] for k in keys], [k[2] for k in keys]


async def _lock(conn: asyncpg.Connection, keys: Sequence[Key]) -> None:
    """Hold `keys` against a refresh or an improvement of them in another transaction, until this one ends: the
    table first, then the keys in ascending order, as every transaction takes them."""
    await conn.execute(LOCK_TABLE)
    await conn.fetchval(KEY_LOCKS, [lock_number(*key) for key in keys])


def _keys(rows) -> list[Key]:
    return [(r["leaderboard"], r["gpu"], r["user_id"]) for r in rows]


async def submission_keys(conn: asyncpg.Connection, submission_id: int) -> list[Key]:
    return _keys(await conn.fetch(SUBMISSION_KEYS, submission_id))


async def board_keys(conn: asyncpg.Connection, leaderboard: str) -> list[Key]:
    return _keys(await conn.fetch(BOARD_KEYS, leaderboard))


async def board_gpu_keys(conn: asyncpg.Connection, leaderboard: str, gpu: str) -> list[Key]:
    return _keys(await conn.fetch(BOARD_GPU_KEYS, leaderboard, gpu))


async def delete_submission(conn: asyncpg.Connection, submission_id: int) -> None:
    await conn.execute(DELETE_SUBMISSION, submission_id)


async def delete_board(conn: asyncpg.Connection, leaderboard: str, deleted_at) -> None:
    await conn.execute(DELETE_BOARD, leaderboard, deleted_at)
