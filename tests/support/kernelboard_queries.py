"""The SQL kernelboard (gpumode.com's website) runs against upstream's `leaderboard` schema, written down as its
backend sends it (psycopg parameters included; comments and blank lines left out), to be run against this platform's
compatibility views (migrations/0105_kernelboard_views.sql)."""

# kernelboard/api/leaderboard.py: the leaderboard page (metadata and each GPU's top run per user)
LEADERBOARD_PAGE = """
        WITH
        leaderboard_info AS (
            SELECT
                name,
                deadline,
                task->>'lang' AS lang,
                description AS description,
                task->'files'->>'reference.py' AS reference,
                task->'benchmarks' AS benchmarks
            FROM leaderboard.leaderboard
            WHERE id = %(leaderboard_id)s
        ),
        gpu_types AS (
            SELECT DISTINCT gpu_type
            FROM leaderboard.gpu_type
            WHERE leaderboard_id = %(leaderboard_id)s
        ),
        submission_counts AS (
            SELECT s.user_id, r.runner, COUNT(DISTINCT s.id) AS submission_count
            FROM leaderboard.submission s
            JOIN leaderboard.runs r ON r.submission_id = s.id
            WHERE s.leaderboard_id = %(leaderboard_id)s
            GROUP BY s.user_id, r.runner
        ),
        ranked_runs AS (
            SELECT r.runner AS runner,
                u.user_name AS user_name,
                r.score AS score,
                s.submission_time AS submission_time,
                s.file_name AS file_name,
                r.submission_id AS submission_id,
                COALESCE(sc.submission_count, 0) AS submission_count,
                RANK() OVER (PARTITION BY r.runner, u.id ORDER BY r.score ASC) AS rank
            FROM leaderboard.runs r
                JOIN leaderboard.submission s ON r.submission_id = s.id
                LEFT JOIN leaderboard.user_info u ON s.user_id = u.id
                LEFT JOIN submission_counts sc ON s.user_id = sc.user_id AND r.runner = sc.runner
            WHERE NOT r.secret AND r.score IS NOT NULL AND r.passed AND s.leaderboard_id = %(leaderboard_id)s
        ),
        top_runs AS (SELECT * FROM ranked_runs WHERE rank = 1)
        SELECT jsonb_build_object(
            'rankings', (SELECT jsonb_object_agg(g.gpu_type, (
                SELECT jsonb_agg(
                    jsonb_build_object(
                        'user_name', r.user_name,
                        'score', r.score,
                        'file_name', r.file_name,
                        'submission_id', r.submission_id,
                        'submission_count', r.submission_count,
                        'submission_time', r.submission_time
                    )
                    ORDER BY r.score ASC
                )
                FROM top_runs r WHERE r.runner = g.gpu_type))),
            'leaderboard', (SELECT jsonb_build_object(
                'name', name,
                'deadline', deadline,
                'lang', lang,
                'description', description,
                'reference', reference,
                'benchmarks', benchmarks,
                'gpu_types', (SELECT jsonb_agg(gpu_type) FROM gpu_types)
            ) FROM leaderboard_info)
        ) AS result FROM (SELECT gpu_type FROM gpu_types) g;
"""

# kernelboard/api/leaderboard_summaries.py: the home page (every board with its top three on its main GPU)
SUMMARIES = """
        WITH
        gpu_types_agg AS (
            SELECT
                leaderboard_id,
                jsonb_agg(DISTINCT gpu_type) AS gpu_types
            FROM leaderboard.gpu_type
            GROUP BY leaderboard_id
        ),
        priority_gpu AS (
            SELECT DISTINCT ON (leaderboard_id)
                leaderboard_id,
                gpu_type
            FROM leaderboard.gpu_type
            ORDER BY leaderboard_id,
                CASE gpu_type
                    WHEN 'B200' THEN 1
                    WHEN 'H100' THEN 2
                    WHEN 'MI300' THEN 3
                    WHEN 'A100' THEN 4
                    WHEN 'L4'   THEN 5
                    WHEN 'T4'   THEN 6
                    ELSE 7
                END,
                gpu_type
        ),
        personal_best_candidates AS (
            SELECT
                r.runner,
                s.leaderboard_id,
                s.user_id,
                u.user_name,
                r.score,
                RANK() OVER (
                    PARTITION BY s.leaderboard_id, r.runner, s.user_id
                    ORDER BY r.score ASC
                ) AS personal_submission_rank
            FROM leaderboard.runs r
            JOIN leaderboard.submission s ON r.submission_id = s.id
            JOIN priority_gpu p ON p.leaderboard_id = s.leaderboard_id
                AND p.gpu_type = r.runner
            LEFT JOIN leaderboard.user_info u ON s.user_id = u.id
            WHERE NOT r.secret
                AND r.score IS NOT NULL
                AND r.passed
        ),
        personal_best_runs AS (
            SELECT * FROM personal_best_candidates
            WHERE personal_submission_rank = 1
        ),
        ranked_users AS (
            SELECT
                leaderboard_id,
                runner,
                user_name,
                score,
                RANK() OVER (
                    PARTITION BY leaderboard_id, runner
                    ORDER BY score ASC
                ) AS user_rank
            FROM personal_best_runs
        ),
        top_users_agg AS (
            SELECT
                leaderboard_id,
                jsonb_agg(
                    jsonb_build_object(
                        'rank', user_rank,
                        'score', score,
                        'user_name', user_name
                    )
                    ORDER BY user_rank
                ) AS top_users
            FROM ranked_users
            WHERE user_rank <= 3
            GROUP BY leaderboard_id
        )
        SELECT jsonb_build_object(
            'id', l.id,
            'name', l.name,
            'visibility', l.visibility,
            'deadline', l.deadline,
            'gpu_types', COALESCE(g.gpu_types, '[]'::jsonb),
            'priority_gpu_type', p.gpu_type,
            'top_users', t.top_users
        )
        FROM leaderboard.leaderboard l
        LEFT JOIN gpu_types_agg g ON g.leaderboard_id = l.id
        LEFT JOIN priority_gpu p ON p.leaderboard_id = l.id
        LEFT JOIN top_users_agg t ON t.leaderboard_id = l.id
        ORDER BY l.id DESC;
"""

# kernelboard/api/leaderboard.py: fastest_trend, and the user search without a query string
FASTEST_TREND = """
            SELECT
                s.id AS submission_id,
                s.user_id,
                u.user_name,
                s.file_name,
                s.submission_time,
                r.score,
                r.runner AS gpu_type
            FROM leaderboard.submission s
            JOIN leaderboard.runs r ON r.submission_id = s.id
            LEFT JOIN leaderboard.user_info u ON s.user_id = u.id
            WHERE s.leaderboard_id = %s
              AND r.score IS NOT NULL
              AND r.passed = true
              AND NOT r.secret
            ORDER BY s.submission_time ASC
"""
USER_SEARCH = """
                SELECT DISTINCT u.id, u.user_name
                FROM leaderboard.user_info u
                JOIN leaderboard.submission s ON s.user_id = u.id
                WHERE s.leaderboard_id = %s
                ORDER BY u.user_name
                LIMIT %s
"""

# kernelboard/api/submission.py: a user's submissions with their public runs, their code, and the deadline check
LIST_SUBMISSIONS = """
            SELECT
                s.id                AS submission_id,
                s.leaderboard_id,
                s.file_name,
                s.submission_time   AS submitted_at,
                s.done              AS submission_done,
                j.status,
                j.error,
                j.last_heartbeat,
                j.created_at        AS job_created_at,
                COALESCE(
                    (
                    SELECT jsonb_agg(
                        jsonb_build_object(
                        'start_time', r.start_time,
                        'end_time',   r.end_time,
                        'mode',       r.mode,
                        'passed',     r.passed,
                        'score',      r.score,
                        'meta',       COALESCE(r.meta::jsonb, '{}'::jsonb),
                        'result',    COALESCE(r.result::jsonb, '{}'::jsonb),
                        'compilation', COALESCE(r.compilation::jsonb, '{}'::jsonb)
                        )
                        ORDER BY r.start_time
                    )
                    FROM leaderboard.runs AS r
                    WHERE r.submission_id = s.id AND r.secret = false
                    ),
                    '[]'::jsonb
                )::json AS runs_json
            FROM leaderboard.submission AS s
            LEFT JOIN leaderboard.submission_job_status AS j
              ON j.submission_id = s.id
            WHERE s.leaderboard_id = %s
              AND s.user_id = %s
            ORDER BY s.submission_time DESC
            LIMIT %s OFFSET %s
"""
LIST_CODES = """
    SELECT
      s.id               AS submission_id,
      s.leaderboard_id,
      cf.id              AS code_id,
      cf.code            AS code_raw
    FROM leaderboard.submission AS s
    JOIN leaderboard.code_files AS cf
      ON cf.id = s.code_id
    WHERE
      s.leaderboard_id = %s
      AND s.id = ANY(%s::int[])
    ORDER BY s.id DESC;
"""
IS_ENDED = """
            SELECT
                (deadline < NOW()) AS is_passed
            FROM leaderboard.leaderboard
            WHERE id = %s;
"""

# kernelboard/lib/auth_utils.py and api/submission.py: sign-in writes a web id unless the user has one, and each
# submit reads it back in clear to send as X-Web-Auth-Id
ENSURE_WEB_ID = """
            INSERT INTO leaderboard.user_info (id, user_name, web_auth_id)
            VALUES (%s, %s, %s)
            ON CONFLICT (id) DO UPDATE
            SET web_auth_id = EXCLUDED.web_auth_id
            WHERE leaderboard.user_info.web_auth_id IS NULL
            RETURNING id, user_name, web_auth_id
"""
USER_TOKEN = """
            SELECT web_auth_id
            FROM leaderboard.user_info
            WHERE id = %s
"""

# ranking_worker.py: the top-three notifier, at each start and each poll; it keeps its own table in the schema
SNAPSHOT_TABLE = """
            CREATE TABLE IF NOT EXISTS leaderboard.ranking_snapshot (
                leaderboard_id  INTEGER NOT NULL,
                gpu_type        TEXT NOT NULL,
                rank            INTEGER NOT NULL,
                user_id         TEXT NOT NULL,
                user_name       TEXT,
                score           NUMERIC NOT NULL,
                snapshot_time   TIMESTAMPTZ NOT NULL DEFAULT NOW(),
                PRIMARY KEY (leaderboard_id, gpu_type, rank)
            );
"""
TOP_THREE = """
WITH
priority_gpu AS (
    SELECT DISTINCT ON (leaderboard_id) leaderboard_id, gpu_type
    FROM leaderboard.gpu_type
    ORDER BY leaderboard_id,
        CASE gpu_type WHEN 'B200' THEN 1 WHEN 'H100' THEN 2 WHEN 'MI300' THEN 3 WHEN 'A100' THEN 4 WHEN 'L4' THEN 5
                      WHEN 'T4' THEN 6 ELSE 7 END,
        gpu_type
),
active_leaderboards AS (
    SELECT id, name FROM leaderboard.leaderboard WHERE deadline > NOW() OR deadline IS NULL
),
personal_best_candidates AS (
    SELECT r.runner, s.leaderboard_id, s.user_id, u.user_name, r.score,
        RANK() OVER (PARTITION BY s.leaderboard_id, r.runner, s.user_id ORDER BY r.score ASC)
            AS personal_submission_rank
    FROM leaderboard.runs r
    JOIN leaderboard.submission s ON r.submission_id = s.id
    JOIN active_leaderboards a ON s.leaderboard_id = a.id
    JOIN priority_gpu p ON p.leaderboard_id = s.leaderboard_id AND p.gpu_type = r.runner
    LEFT JOIN leaderboard.user_info u ON s.user_id = u.id
    WHERE NOT r.secret AND r.score IS NOT NULL AND r.passed
),
personal_best_runs AS (SELECT * FROM personal_best_candidates WHERE personal_submission_rank = 1),
ranked_users AS (
    SELECT leaderboard_id, runner, user_id, user_name, score,
        RANK() OVER (PARTITION BY leaderboard_id, runner ORDER BY score ASC) AS user_rank
    FROM personal_best_runs
)
SELECT a.id AS leaderboard_id, a.name AS leaderboard_name, p.gpu_type, r.user_rank AS rank, r.user_id, r.user_name,
       r.score
FROM active_leaderboards a
JOIN priority_gpu p ON p.leaderboard_id = a.id
JOIN ranked_users r ON r.leaderboard_id = a.id AND r.runner = p.gpu_type
WHERE r.user_rank <= 3
ORDER BY a.id, r.user_rank;
"""
SNAPSHOT_READ = """
            SELECT leaderboard_id, gpu_type, rank, user_id, user_name, score
            FROM leaderboard.ranking_snapshot
"""
SNAPSHOT_WRITE = """
                INSERT INTO leaderboard.ranking_snapshot
                    (leaderboard_id, gpu_type, rank, user_id, user_name, score, snapshot_time)
                VALUES (%s, %s, %s, %s, %s, %s, NOW())
                ON CONFLICT (leaderboard_id, gpu_type, rank)
                DO UPDATE SET
                    user_id = EXCLUDED.user_id,
                    user_name = EXCLUDED.user_name,
                    score = EXCLUDED.score,
                    snapshot_time = EXCLUDED.snapshot_time
"""
SNAPSHOT_CLEANUP = "DELETE FROM leaderboard.ranking_snapshot WHERE leaderboard_id = ANY(%s)"
