"""Set-based forms of the ledger's busiest statements: one statement for all of a batch's rows.

Each takes the plan's rows as column arrays (in stream order, numbered by WITH ORDINALITY) and leaves the read model as
applying the rows one by one would: where several rows of a batch hit the same key, the row that sequential
application would leave standing is picked first (the first of an insert that does nothing on conflict, the last of
an overwrite, the furthest along of a lifecycle). Live batches and replays of thousands of events go through them
alike, so the equality test of live against replayed checks them. A list column travels as JSON (Postgres has no
arrays of arrays of different lengths, and the driver reads nested lists as one).
"""

from __future__ import annotations

import json

SET_STATEMENTS = {
    "submission_insert": """
        INSERT INTO submissions (id, leaderboard_id, user_id, user_name, file_name, code, mode, gpus, submitted_at)
        SELECT DISTINCT ON (t.id) t.id, COALESCE(l.id, 0), t.user_id, t.user_name, t.file_name, t.code, t.mode,
               ARRAY(SELECT jsonb_array_elements_text(t.gpus::jsonb)), t.submitted_at
        FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
                    $8::text[], $9::timestamptz[])
             WITH ORDINALITY AS t(id, board, user_id, user_name, file_name, code, mode, gpus, submitted_at, ord)
        LEFT JOIN leaderboards l ON lower(l.name) = lower(t.board)
        ORDER BY t.id, t.ord
        ON CONFLICT (id) DO NOTHING""",
    # wakes a gateway waiting to answer 202 only once the submission is readable (http-api.md §3.9)
    "notify_submission": "SELECT count(pg_notify('kb_submission', p)) FROM unnest($1::text[]) AS p",
    # done and the terminal status change in one transaction, so a poller never sees one without the other;
    # a job ends at the first row of the furthest status: later rows of the same status would not move it
    "job_set": """
        INSERT INTO jobs (submission_id, status, error, updated_at)
        SELECT DISTINCT ON (t.id) t.id, t.status, t.error, now()
        FROM unnest($1::bigint[], $2::text[], $3::text[]) WITH ORDINALITY AS t(id, status, error, ord)
        ORDER BY t.id, job_rank(t.status) DESC, t.ord
        ON CONFLICT (submission_id) DO UPDATE SET status = EXCLUDED.status, error = EXCLUDED.error, updated_at = now()
        WHERE job_rank(jobs.status) < job_rank(EXCLUDED.status)""",
    # the first row that finishes the submission wins; before any does, the last row
    "submission_status": """
        UPDATE submissions s SET status = t.status, done = t.done
        FROM (SELECT DISTINCT ON (u.id) u.id, u.status, u.done
              FROM unnest($1::bigint[], $2::text[], $3::bool[]) WITH ORDINALITY AS u(id, status, done, ord)
              ORDER BY u.id, u.done DESC, CASE WHEN u.done THEN u.ord ELSE -u.ord END) AS t
        WHERE s.id = t.id AND NOT s.done""",
    # A run's later events can precede its RunRequested in the stream (a dispatcher that died between its commit
    # and its outbox publish): this or run_request_status creates the row, and each fills in only what it knows.
    "run_request_insert": """
        INSERT INTO run_requests (run_id, submission_id, gpu, mode, secret, requested_at)
        SELECT DISTINCT ON (t.run_id) t.run_id, t.submission_id, t.gpu, t.mode, t.secret, t.requested_at
        FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::bool[], $6::timestamptz[])
             WITH ORDINALITY AS t(run_id, submission_id, gpu, mode, secret, requested_at, ord)
        ORDER BY t.run_id, t.ord DESC
        ON CONFLICT (run_id) DO UPDATE SET mode = EXCLUDED.mode, secret = EXCLUDED.secret,
               requested_at = EXCLUDED.requested_at""",
    "run_request_outcome": """
        UPDATE run_requests r SET success = t.success, result_error = t.result_error, system = t.system
        FROM (SELECT DISTINCT ON (u.run_id) u.run_id, u.success, u.result_error, u.system
              FROM unnest($1::text[], $2::bool[], $3::text[], $4::jsonb[])
                   WITH ORDINALITY AS u(run_id, success, result_error, system, ord)
              ORDER BY u.run_id, u.ord DESC) AS t
        WHERE r.run_id = t.run_id""",
    "stage_insert": """
        INSERT INTO runs (run_id, stage, submission_id, gpu, secret, passed, result, system, harness_version,
                          start_time, end_time, recorded_seq)
        SELECT DISTINCT ON (t.run_id, t.stage) t.run_id, t.stage, t.submission_id, t.gpu, t.secret, t.passed,
               t.result, t.system, t.harness_version, t.start_time, t.end_time, t.recorded_seq
        FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::bool[], $6::bool[], $7::jsonb[],
                    $8::jsonb[], $9::text[], $10::timestamptz[], $11::timestamptz[], $12::bigint[])
             WITH ORDINALITY AS t(run_id, stage, submission_id, gpu, secret, passed, result, system, harness_version,
                                  start_time, end_time, recorded_seq, ord)
        ORDER BY t.run_id, t.stage, t.ord
        ON CONFLICT (run_id, stage) DO NOTHING""",
    "score_insert": """
        INSERT INTO scores (submission_id, gpu, leaderboard_id, user_id, score, secret_score, run_id, submitted_at)
        SELECT DISTINCT ON (t.submission_id, t.gpu) t.submission_id, t.gpu,
               (SELECT id FROM leaderboards WHERE lower(name) = lower(t.board)), t.user_id, t.score, t.secret_score,
               t.run_id, t.submitted_at
        FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::float8[], $6::float8[], $7::text[],
                    $8::timestamptz[])
             WITH ORDINALITY AS t(submission_id, gpu, board, user_id, score, secret_score, run_id, submitted_at, ord)
        ORDER BY t.submission_id, t.gpu, t.ord
        ON CONFLICT (submission_id, gpu) DO NOTHING""",
    "run_score": """
        UPDATE runs r SET score = t.score
        FROM (SELECT DISTINCT ON (u.run_id) u.run_id, u.score
              FROM unnest($1::text[], $2::float8[]) WITH ORDINALITY AS u(run_id, score, ord)
              ORDER BY u.run_id, u.ord DESC) AS t
        WHERE r.run_id = t.run_id AND r.stage = 'leaderboard'""",
    "rank_change": """
        INSERT INTO rank_changes (stream_seq, leaderboard, gpu, top, occurred_at)
        SELECT t.seq, t.board, t.gpu, t.top::jsonb, t.occurred_at
        FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::timestamptz[]) AS t(seq, board, gpu, top,
                                                                                             occurred_at)
        ON CONFLICT DO NOTHING""",
}
# Where a statement's rows carry a list, which travels as JSON text.
JSON_LISTS = {"submission_insert": 7, "rank_change": 3}


def columns(statement: str, rows: list[tuple]) -> list[list]:
    """The rows of a set statement as its column arrays."""
    arrays = [list(column) for column in zip(*rows, strict=True)]
    if statement in JSON_LISTS:
        at = JSON_LISTS[statement]
        arrays[at] = [json.dumps(value) for value in arrays[at]]
    return arrays
