"""SQL of the ledger's projections. Every statement is applied to many rows at once: the busiest as one set-based
statement over a step's archived events (archive_sql.py), the others pipelined by executemany."""

from __future__ import annotations

import asyncpg

from schemas.envelope import Event
from schemas.ledger_position import POSITION_CHANNEL
from services.ledger.archive_sql import ARCHIVE_STATEMENTS, STANDING_EVENTS, STANDING_REFRESH
from services.ledger.projections import STATEMENT_ORDER, Plan, archive_rows, plan_batch, step_filter

ARCHIVE = """
INSERT INTO event_archive (stream_seq, event_id, event_type, subject, correlation_id, occurred_at, payload)
SELECT seq, id, type, subject, correlation, at, payload::jsonb
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::text[])
     AS e(seq, id, type, subject, correlation, at, payload)
ON CONFLICT (stream_seq) DO NOTHING
"""
STATEMENTS = {
    # The id the event names (an import keeps upstream's), else the next of the practice or the ordinary sequence:
    # projection order numbers boards, so a rebuild, restarting both sequences, gives each the id it had. A named id
    # moves the ordinary sequence past it. A board whose name or id is taken is not made (the import refuses those
    # before it publishes; this covers a board made between its check and its events).
    "leaderboard_create": """
        WITH made AS (
            INSERT INTO leaderboards (id, name, description, task, task_hash, templates, gpus, deadline, secret_seed,
                                      visibility, ranking_by, creator_id, forum_id, created_at, practice)
            VALUES (COALESCE($14::integer, CASE WHEN $15::boolean THEN nextval('practice_board_ids')
                                                ELSE nextval('leaderboards_id_seq') END),
                    $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $15)
            ON CONFLICT DO NOTHING)
        SELECT setval('leaderboards_id_seq', GREATEST($14::integer, last_value), true)
        FROM leaderboards_id_seq WHERE $14::integer IS NOT NULL""",
    "leaderboard_update": """
        UPDATE leaderboards SET description = $2, task = $3, task_hash = $4, templates = $5, deadline = $6,
               ranking_by = $7
        WHERE lower(name) = lower($1)""",
    "leaderboard_purge": """
        WITH board AS (SELECT id FROM leaderboards WHERE lower(name) = lower($1)),
             scored AS (DELETE FROM scores WHERE leaderboard_id IN (SELECT id FROM board)),
             standing AS (DELETE FROM standings WHERE leaderboard_id IN (SELECT id FROM board)),
             versions AS (DELETE FROM standing_versions WHERE leaderboard_id IN (SELECT id FROM board))
        UPDATE submissions SET deleted = true WHERE leaderboard_id IN (SELECT id FROM board)""",
    "leaderboard_delete": "DELETE FROM leaderboards WHERE lower(name) = lower($1)",
    "user_upsert": """
        INSERT INTO users (user_id, user_name, cli_id_sha256, web_auth_id_sha256) VALUES ($1, $2, $3, $4)
        ON CONFLICT (user_id) DO UPDATE SET user_name = $2, cli_id_sha256 = $3,
               web_auth_id_sha256 = COALESCE($4, users.web_auth_id_sha256)""",
    "user_provider": "UPDATE users SET provider = $2 WHERE user_id = $1",
    # a web id another user holds is left with them (the admin route refuses it first), so the step cannot fail
    "user_web_id": """
        INSERT INTO users (user_id, user_name, web_auth_id_sha256)
        SELECT $1, $2, $3 WHERE NOT EXISTS (SELECT 1 FROM users WHERE web_auth_id_sha256 = $3 AND user_id <> $1)
        ON CONFLICT (user_id) DO UPDATE SET web_auth_id_sha256 = $3""",
    "user_website": "INSERT INTO users (user_id, user_name) VALUES ($1, $2) ON CONFLICT (user_id) DO NOTHING",
    # policy changes (schemas.policy_events); leaderboards are named, their ids resolved at projection time
    "intake_set": """
        INSERT INTO intake (accepting, changed_at) VALUES ($1, $2)
        ON CONFLICT (singleton) DO UPDATE SET accepting = $1, changed_at = $2""",
    "user_ban": "UPDATE users SET banned = $2 WHERE user_id = $1",
    "visibility_set": "UPDATE leaderboards SET visibility = $2 WHERE lower(name) = lower($1)",
    "rate_limit_put": """
        INSERT INTO rate_limits (leaderboard_id, mode_category, max_submissions_per_hour)
        SELECT id, $2, $3 FROM leaderboards WHERE lower(name) = lower($1)
        ON CONFLICT (leaderboard_id, mode_category) DO UPDATE SET max_submissions_per_hour = $3""",
    "precheck_policy_put": """
        INSERT INTO precheck_policies (leaderboard_id, outcomes)
        SELECT id, $2 FROM leaderboards WHERE lower(name) = lower($1)
        ON CONFLICT (leaderboard_id) DO UPDATE SET outcomes = $2""",
    "invite_create": """
        INSERT INTO invites (code, leaderboard_ids, created_at)
        VALUES ($1, ARRAY(SELECT id FROM leaderboards WHERE lower(name) = ANY(SELECT lower(n) FROM unnest($2::text[])
                                                                                 AS n) ORDER BY id), $3)
        ON CONFLICT (code) DO NOTHING""",
    # the first claim wins, even one replayed long after the stream's duplicate window
    "invite_claim": """
        UPDATE invites SET user_id = $2, user_name = $3, claimed_at = $4 WHERE code = $1 AND user_id IS NULL""",
    "invite_revoke": "DELETE FROM invites WHERE code = $1",
    "user_rename": "UPDATE users SET user_name = $2 WHERE user_id = $1",
    "user_rename_submissions": "UPDATE submissions SET user_name = $2 WHERE user_id = $1 AND user_name <> $2",
    # hidden from every view and ranking; the row stays, so a replay or an admin can still see what was deleted
    "submission_delete": "UPDATE submissions SET deleted = true WHERE id = $1",
    "precheck_clear": """
        UPDATE precheck_verdicts SET cleared_by = $2, cleared_at = $3, clear_reason = $4
        WHERE submission_id = $1 AND cleared_at IS NULL""",
    # the one step back from a terminal status: a cleared false positive gets the status its runs earned
    "submission_reinstate": """
        WITH job AS (UPDATE jobs SET status = $2, error = $3, updated_at = now()
                     WHERE submission_id = $1 AND status = 'hacked')
        UPDATE submissions SET status = $2 WHERE id = $1 AND status = 'hacked'""",
    "run_request_status": """
        INSERT INTO run_requests AS r (run_id, submission_id, gpu, mode, secret, status, backend, job_ref, error,
                                       requested_at, started_at, finished_at)
        VALUES ($1, $7, $8, '', false, $2, $3, $4, $5, $6, CASE WHEN $2 = 'running' THEN $6::timestamptz END,
                CASE WHEN $2 IN ('completed', 'failed') THEN $6::timestamptz END)
        ON CONFLICT (run_id) DO UPDATE SET status = $2, backend = COALESCE($3, r.backend),
               job_ref = COALESCE($4, r.job_ref), error = COALESCE($5, r.error),
               started_at = CASE WHEN $2 = 'running' THEN $6 ELSE r.started_at END,
               finished_at = CASE WHEN $2 IN ('completed', 'failed') THEN $6 ELSE r.finished_at END
        WHERE run_rank(r.status) < run_rank($2)""",
    # The latest beat wins whatever the order a batch applies them in (a replay batches differently than live).
    "job_running": """
        UPDATE jobs SET status = CASE WHEN job_rank(status) <= job_rank('running') THEN 'running' ELSE status END,
               last_heartbeat = GREATEST(last_heartbeat, $2), updated_at = now()
        WHERE submission_id = $1""",
    "job_heartbeat": "UPDATE jobs SET last_heartbeat = GREATEST(last_heartbeat, $2) WHERE submission_id = $1",
    "secret_run_score": """
        UPDATE runs SET score = $3 WHERE submission_id = $1 AND gpu = $2 AND secret AND stage = 'leaderboard'""",
    # a rejudge's revision: a new score replaces the old one, a score of NULL takes the submission off the board
    "score_revise": """
        WITH withdrawn AS (DELETE FROM scores WHERE submission_id = $1 AND gpu = $2 AND $5::float8 IS NULL),
             run AS (UPDATE runs SET score = $5 WHERE run_id = $7 AND stage = 'leaderboard')
        INSERT INTO scores (submission_id, gpu, leaderboard_id, user_id, score, secret_score, run_id, submitted_at,
                            recorded_seq)
        SELECT $1, $2, l.id, $4, $5, $6, $7, $8, $9 FROM leaderboards l
        WHERE lower(l.name) = lower($3) AND $5::float8 IS NOT NULL  -- no board: nothing to stand on
        ON CONFLICT (submission_id, gpu) DO UPDATE
        SET score = EXCLUDED.score, secret_score = EXCLUDED.secret_score, run_id = EXCLUDED.run_id""",
    # A renamed user's standings show the new name (after standing_refresh, which reads the renamed submissions); the
    # version moves on for every board they stand on, whatever the step, so live and replayed versions agree.
    "standing_rename": """
        WITH renamed AS (UPDATE standings SET user_name = $2 WHERE user_id = $1 RETURNING leaderboard_id, gpu),
        versions AS (
            UPDATE standing_versions v SET version = GREATEST(v.version, $3)
            FROM (SELECT DISTINCT leaderboard_id, gpu FROM renamed) AS r
            WHERE v.leaderboard_id = r.leaderboard_id AND v.gpu = r.gpu
            RETURNING v.leaderboard_id, v.gpu, v.version
        )
        SELECT count(pg_notify('kb_standings', json_build_object('board', leaderboard_id, 'gpu', gpu,
                                                                 'version', version)::text)) FROM versions""",
}
# Every statement that writes the read model.
ALL_SQL = [*STATEMENTS.values(), *(sql for _, sql in ARCHIVE_STATEMENTS.values()), STANDING_REFRESH]
# The read model's tables: what a rebuild (`kernelbot events replay ledger`) empties and fills again. A new projection
# adds its table here; tests/unit/test_replay_tables.py fails while a statement above writes a table not listed.
TABLES = ("leaderboards", "scores", "standings", "standing_versions", "submissions", "users", "intake", "rate_limits",
          "precheck_policies", "invites", "precheck_verdicts", "jobs", "run_requests", "runs", "rank_changes")


ANNOUNCE_POSITION = "SELECT pg_notify($1, $2)"

async def apply_step(conn: asyncpg.Connection, plan: Plan, lo: int, hi: int, seqs: list[int] | None, *,
                     notify: bool = True) -> None:
    """Apply one step whose events are archived already: stream sequences lo..hi, exactly `seqs` when given."""
    for name in STATEMENT_ORDER:
        if name in ARCHIVE_STATEMENTS:
            types, sql = ARCHIVE_STATEMENTS[name]
            if plan.types.intersection(types) and (notify or name != "notify_submission"):
                await conn.execute(sql, lo, hi, seqs)
        elif name == "standing_refresh":
            if plan.types.intersection(STANDING_EVENTS):
                await conn.execute(STANDING_REFRESH, lo, hi, seqs)
        elif name in plan.rows:
            await conn.executemany(STATEMENTS[name], plan.rows[name])


async def project_batch(conn: asyncpg.Connection, events: list[tuple[int, Event]], *, notify: bool = True) -> None:
    """Archive and project a batch of (stream sequence, event) inside the caller's transaction; with `notify`, also
    announce the ledger's new position (services/core/infrastructure/position.py), delivered when the transaction
    commits."""
    await conn.execute(ARCHIVE, *archive_rows(events))
    for plan in plan_batch(events):
        await apply_step(conn, plan, plan.seqs[0], plan.seqs[-1], step_filter(plan.seqs), notify=notify)
    if notify and events:
        await conn.execute(ANNOUNCE_POSITION, POSITION_CHANNEL, str(max(seq for seq, _ in events)))
