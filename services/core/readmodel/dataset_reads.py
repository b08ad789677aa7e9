"""SQL of the public data set's export (services/core/opendata/dataset.py says which rows go out)."""

from __future__ import annotations

import asyncpg

from services.ranking.rules import SUBMISSION_STANDS

# Every submission still standing on the boards, with each GPU it has a ranked public score on (the scores table
# holds exactly the eligible ones), or once with no score. A code's id is the first submission of that code among
# the boards exported: the data set's code_id, which upstream takes from its table of distinct code files.
ROWS = f"""
SELECT s.id AS submission_id, s.leaderboard_id::bigint AS leaderboard_id, l.name AS problem_name, s.user_id,
       coalesce(u.user_name, s.user_name) AS user_name,
       min(s.id) OVER (PARTITION BY md5(s.code)) AS code_id,
       s.file_name, s.submitted_at AS submission_time, s.status,
       sc.score, CASE WHEN sc.score IS NULL THEN NULL ELSE true END AS passed,
       CASE WHEN sc.score IS NULL THEN NULL ELSE 'leaderboard' END AS mode, sc.gpu AS runner, s.code
FROM submissions s
JOIN leaderboards l ON l.id = s.leaderboard_id
LEFT JOIN users u ON u.user_id = s.user_id
LEFT JOIN scores sc ON sc.submission_id = s.id AND {SUBMISSION_STANDS}
WHERE s.leaderboard_id = ANY($1::int[]) AND NOT s.deleted
"""
BOARDS = "SELECT id, name, deadline, visibility FROM leaderboards ORDER BY id"


async def rows(conn: asyncpg.Connection, leaderboard_ids: list[int]) -> list[dict]:
    return [dict(row) for row in await conn.fetch(ROWS, leaderboard_ids)]


async def boards(conn: asyncpg.Connection) -> list[dict]:
    return [dict(row) for row in await conn.fetch(BOARDS)]
