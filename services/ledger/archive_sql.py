"""The ledger's busiest projections, as set-based statements over the archived events themselves.

A batch is archived first (repository.ARCHIVE); each statement here then reads the archived events of its types in
the batch's range of stream sequences ($1 to $2, or exactly the sequences $3 when given) and applies them all in one
statement. Live batches and replays (tens of thousands of events a step) run the very same statements, so replay is
set-based and the equality test of live against replayed checks one definition.

Each statement leaves the read model as applying its events one by one in stream order would: where several events
of a step hit the same key, the one that sequential application would leave standing is picked (the first of an
insert that does nothing on conflict, the last of an overwrite, the furthest along of a lifecycle). `ord` is the
stream sequence.
"""

from __future__ import annotations

from services.ledger.standings_sql import STANDING_REFRESH_FROM


def events(event_type: str, alias: str = "e") -> str:
    """FROM clause of the archived events of one type in the step."""
    return (f"FROM event_archive {alias} WHERE {alias}.event_type = '{event_type}' "
            f"AND {alias}.stream_seq BETWEEN $1 AND $2 AND ($3::bigint[] IS NULL OR {alias}.stream_seq = ANY($3))")


SUBMISSION = "(e.payload->>'submission_id')::bigint"
AT = "(e.payload->>'occurred_at')::timestamptz"
# A completed run's fields, read from its payload at once: the payload (its result) is large enough to be stored
# compressed, and each `payload->` would decompress all of it again, several times per event and stage.
COMPLETED = ("jsonb_to_record(e.payload) AS p(run_id text, submission_id bigint, gpu text, secret bool, "
             "occurred_at timestamptz, result jsonb)")

JOB_ROWS = f"""
    SELECT {SUBMISSION} AS id, 'initial' AS status, NULL::text AS error, e.stream_seq AS ord
    {events('SubmissionReceived')}
    UNION ALL SELECT {SUBMISSION}, 'pending', NULL, e.stream_seq {events('SubmissionAccepted')}
    UNION ALL SELECT {SUBMISSION}, 'failed', e.payload->>'reason', e.stream_seq {events('SubmissionRejected')}
    UNION ALL SELECT {SUBMISSION}, e.payload->>'status', e.payload->>'error', e.stream_seq
    {events('SubmissionFinished')}"""
SUBMISSION_STATUS_ROWS = f"""
    SELECT {SUBMISSION} AS id, 'accepted' AS status, false AS done, e.stream_seq AS ord
    {events('SubmissionAccepted')}
    UNION ALL SELECT {SUBMISSION}, 'rejected', true, e.stream_seq {events('SubmissionRejected')}
    UNION ALL SELECT {SUBMISSION}, e.payload->>'status', true, e.stream_seq {events('SubmissionFinished')}"""
# Each submission's status after the step: the first event that finishes it wins; before any does, the last one.
SUBMISSION_STATUS = f"""
    SELECT DISTINCT ON (u.id) u.id, u.status, u.done FROM ({SUBMISSION_STATUS_ROWS}) AS u
    ORDER BY u.id, u.done DESC, CASE WHEN u.done THEN u.ord ELSE -u.ord END"""
RUN_STATUS_ROWS = f"""
    SELECT e.payload->>'run_id' AS run_id, 'dispatched' AS status, e.payload->>'backend' AS backend,
           e.payload->>'job_ref' AS job_ref, NULL::text AS error, {AT} AS at, {SUBMISSION} AS submission_id,
           e.payload->>'gpu' AS gpu, e.stream_seq AS ord, NULL::bool AS success, NULL::text AS result_error,
           NULL::jsonb AS system {events('RunDispatched')}
    UNION ALL SELECT e.payload->>'run_id', 'running', NULL, NULL, NULL, {AT}, {SUBMISSION}, e.payload->>'gpu',
           e.stream_seq, NULL, NULL, NULL {events('RunStarted')}
    UNION ALL SELECT p.run_id, 'completed', NULL, NULL, NULL, p.occurred_at, p.submission_id, p.gpu, e.stream_seq,
           (p.result->>'success')::bool, p.result->>'error', p.result->'system'
    FROM event_archive e CROSS JOIN LATERAL {COMPLETED}
    WHERE e.event_type = 'RunCompleted' AND e.stream_seq BETWEEN $1 AND $2
      AND ($3::bigint[] IS NULL OR e.stream_seq = ANY($3))
    UNION ALL SELECT e.payload->>'run_id', 'failed', NULL, NULL,
           (e.payload->>'reason') || ': ' || (e.payload->>'detail'), {AT}, {SUBMISSION}, e.payload->>'gpu',
           e.stream_seq, NULL, NULL, NULL {events('RunFailed')}"""

# The last score the step gives a run, and the last secret score it gives a submission's GPU.
RUN_SCORES = f"""
    SELECT DISTINCT ON (e.payload->>'run_id') e.payload->>'run_id' AS run_id, (e.payload->>'score')::float8 AS score
    {events('ScoreComputed')} ORDER BY e.payload->>'run_id', e.stream_seq DESC"""
SECRET_SCORES = f"""
    SELECT DISTINCT ON ({SUBMISSION}, e.payload->>'gpu') {SUBMISSION} AS submission_id, e.payload->>'gpu' AS gpu,
           (e.payload->>'secret_score')::float8 AS score
    {events('ScoreComputed')} AND e.payload->>'secret_score' IS NOT NULL
    ORDER BY {SUBMISSION}, e.payload->>'gpu', e.stream_seq DESC"""

NOTIFYING = ("SubmissionReceived", "SubmissionRejected", "SubmissionFinished", "SubmissionDeleted", "RunRequested")

# An UPDATE of rows that may predate the step also names its keys as `= ANY(ARRAY(...))`: the rows are then found
# through the table's index whatever the join plan, where a replay (which joins by hashing, replay.py) would otherwise
# scan the whole table once per step, a cost that grows with the history: 5M events replayed at 29,000/s, not 50,000.
# name -> (the event types it reads, the statement); each name is a step of projections.STATEMENT_ORDER
ARCHIVE_STATEMENTS: dict[str, tuple[tuple[str, ...], str]] = {
    "submission_insert": (("SubmissionReceived",), f"""
        INSERT INTO submissions (id, leaderboard_id, user_id, user_name, file_name, code, mode, gpus, submitted_at,
                                 status, done)
        SELECT DISTINCT ON (t.id) t.id, COALESCE(l.id, 0), t.user_id, t.user_name, t.file_name, t.code, t.mode,
               t.gpus, t.submitted_at, COALESCE(st.status, 'received'), COALESCE(st.done, false)
        FROM (SELECT {SUBMISSION} AS id, e.payload->>'leaderboard' AS board, e.payload->>'user_id' AS user_id,
                     e.payload->>'user_name' AS user_name, e.payload->>'file_name' AS file_name,
                     e.payload->>'code' AS code, e.payload->>'mode' AS mode,
                     ARRAY(SELECT jsonb_array_elements_text(e.payload->'gpus')) AS gpus, {AT} AS submitted_at,
                     e.stream_seq AS ord
              {events('SubmissionReceived')}) AS t
        LEFT JOIN leaderboards l ON lower(l.name) = lower(t.board)
        LEFT JOIN ({SUBMISSION_STATUS}) AS st ON st.id = t.id
        ORDER BY t.id, t.ord
        ON CONFLICT (id) DO NOTHING"""),
    # wakes a gateway waiting to answer only once the submission (its deletion, its first run) is readable
    # (docs/http-api.md "Submitting"), and a held long poll once the submission finished
    "notify_submission": (NOTIFYING, f"""
        SELECT count(pg_notify('kb_submission', t.id)) FROM (
            SELECT e.payload->>'submission_id' AS id, e.stream_seq AS ord FROM event_archive e
            WHERE e.event_type IN ({", ".join(f"'{t}'" for t in NOTIFYING)})
              AND e.stream_seq BETWEEN $1 AND $2 AND ($3::bigint[] IS NULL OR e.stream_seq = ANY($3))
            ORDER BY e.stream_seq) AS t"""),
    # done and the terminal status change in one transaction, so a poller never sees one without the other; a job
    # ends at the first event of the furthest status: later ones of the same status would not move it
    "job_set": (("SubmissionReceived", "SubmissionAccepted", "SubmissionRejected", "SubmissionFinished"), f"""
        INSERT INTO jobs (submission_id, status, error, updated_at)
        SELECT DISTINCT ON (t.id) t.id, t.status, t.error, now() FROM ({JOB_ROWS}) AS t
        ORDER BY t.id, job_rank(t.status) DESC, t.ord
        ON CONFLICT (submission_id) DO UPDATE SET status = EXCLUDED.status, error = EXCLUDED.error, updated_at = now()
        WHERE job_rank(jobs.status) < job_rank(EXCLUDED.status)"""),
    # a submission received in this step got its status from submission_insert: this moves the ones already there
    "submission_status": (("SubmissionAccepted", "SubmissionRejected", "SubmissionFinished"), f"""
        WITH t AS MATERIALIZED ({SUBMISSION_STATUS})
        UPDATE submissions s SET status = t.status, done = t.done FROM t
        WHERE s.id = t.id AND s.id = ANY(ARRAY(SELECT id FROM t))
          AND NOT s.done AND (s.status, s.done) IS DISTINCT FROM (t.status, t.done)"""),
    # the admission's pre-check verdict, where a rule fired (the first verdict of a submission stays)
    "precheck_verdict_insert": (("SubmissionAccepted", "SubmissionRejected"), f"""
        INSERT INTO precheck_verdicts (submission_id, outcome, rules, findings, detail, decided_at)
        SELECT DISTINCT ON ({SUBMISSION}) {SUBMISSION}, e.payload->'precheck'->>'outcome',
               ARRAY(SELECT DISTINCT f->>'rule' COLLATE "C" FROM jsonb_array_elements(e.payload->'precheck'->'findings')
                     AS f ORDER BY 1),  -- PrecheckVerdict.rules: sorted, not in the payload
               e.payload->'precheck'->'findings', e.payload->'precheck'->>'detail', {AT}
        FROM event_archive e WHERE e.event_type IN ('SubmissionAccepted', 'SubmissionRejected')
          AND e.stream_seq BETWEEN $1 AND $2 AND ($3::bigint[] IS NULL OR e.stream_seq = ANY($3))
          AND jsonb_typeof(e.payload->'precheck') = 'object'
        ORDER BY {SUBMISSION}, e.stream_seq
        ON CONFLICT (submission_id) DO NOTHING"""),
    # A run's later events can precede its RunRequested in the stream (a dispatcher that died between its commit
    # and its outbox publish): this or run_request_status creates the row, and each fills in only what it knows.
    "run_request_insert": (("RunRequested",), f"""
        INSERT INTO run_requests (run_id, submission_id, gpu, mode, secret, requested_at)
        SELECT DISTINCT ON (e.payload->>'run_id') e.payload->>'run_id', {SUBMISSION}, e.payload->>'gpu',
               e.payload->>'mode', (e.payload->>'secret')::bool, {AT}
        {events('RunRequested')}
        ORDER BY e.payload->>'run_id', e.stream_seq DESC
        ON CONFLICT (run_id) DO UPDATE SET mode = EXCLUDED.mode, secret = EXCLUDED.secret,
               requested_at = EXCLUDED.requested_at"""),
    # A run only moves forward: an event applies when it is further along than the run and every earlier event of
    # it in the step. Of the events that apply, the last sets the status, and each field keeps the last value given.
    "run_request_status": (("RunDispatched", "RunStarted", "RunCompleted", "RunFailed"), f"""
        WITH t AS ({RUN_STATUS_ROWS}),
        marked AS (
            SELECT t.*, run_rank(t.status) AS rank,
                   CASE WHEN r.run_id IS NULL THEN -1 ELSE run_rank(r.status) END AS held,  -- run_rank(NULL) is 3
                   COALESCE(max(run_rank(t.status)) OVER (PARTITION BY t.run_id ORDER BY t.ord
                                                          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), -1)
                       AS before
            FROM t LEFT JOIN (SELECT run_id, status FROM run_requests WHERE run_id = ANY(ARRAY(SELECT run_id FROM t)))
                             AS r ON r.run_id = t.run_id
        ),
        folded AS (
            SELECT run_id, (array_agg(status ORDER BY ord DESC))[1] AS status,
                   (array_agg(backend ORDER BY ord DESC) FILTER (WHERE backend IS NOT NULL))[1] AS backend,
                   (array_agg(job_ref ORDER BY ord DESC) FILTER (WHERE job_ref IS NOT NULL))[1] AS job_ref,
                   (array_agg(error ORDER BY ord DESC) FILTER (WHERE error IS NOT NULL))[1] AS error,
                   (array_agg(at ORDER BY ord DESC) FILTER (WHERE status = 'running'))[1] AS started_at,
                   (array_agg(at ORDER BY ord DESC) FILTER (WHERE status IN ('completed', 'failed')))[1]
                       AS finished_at,
                   (array_agg(at ORDER BY ord))[1] AS first_at,
                   (array_agg(submission_id ORDER BY ord))[1] AS submission_id,
                   (array_agg(gpu ORDER BY ord))[1] AS gpu
            FROM marked WHERE rank > GREATEST(held, before) GROUP BY run_id
        ),
        outcome AS (  -- what run_request_outcome sets, given to a new row at once rather than by a second write
            SELECT DISTINCT ON (run_id) run_id, success, result_error, system FROM t WHERE status = 'completed'
            ORDER BY run_id, ord DESC
        )
        INSERT INTO run_requests AS r (run_id, submission_id, gpu, mode, secret, status, backend, job_ref, error,
                                       requested_at, started_at, finished_at, success, result_error, system)
        SELECT f.run_id, f.submission_id, f.gpu, '', false, f.status, f.backend, f.job_ref, f.error, f.first_at,
               f.started_at, f.finished_at, o.success, COALESCE(o.result_error, ''), o.system
        FROM folded f LEFT JOIN outcome o ON o.run_id = f.run_id
        ON CONFLICT (run_id) DO UPDATE SET status = EXCLUDED.status, backend = COALESCE(EXCLUDED.backend, r.backend),
               job_ref = COALESCE(EXCLUDED.job_ref, r.job_ref), error = COALESCE(EXCLUDED.error, r.error),
               started_at = COALESCE(EXCLUDED.started_at, r.started_at),
               finished_at = COALESCE(EXCLUDED.finished_at, r.finished_at)
        WHERE run_rank(r.status) < run_rank(EXCLUDED.status)"""),
    "run_request_outcome": (("RunCompleted",), f"""
        WITH t AS MATERIALIZED (
            SELECT DISTINCT ON (p.run_id) p.run_id, (p.result->>'success')::bool AS success,
                   p.result->>'error' AS result_error, p.result->'system' AS system
            FROM event_archive e CROSS JOIN LATERAL {COMPLETED}
            WHERE e.event_type = 'RunCompleted' AND e.stream_seq BETWEEN $1 AND $2
              AND ($3::bigint[] IS NULL OR e.stream_seq = ANY($3))
            ORDER BY p.run_id, e.stream_seq DESC)
        UPDATE run_requests r SET success = t.success, result_error = t.result_error, system = t.system FROM t
        WHERE r.run_id = t.run_id AND r.run_id = ANY(ARRAY(SELECT run_id FROM t))
          AND (r.success, r.result_error, r.system) IS DISTINCT FROM (t.success, t.result_error, t.system)"""),
    # The latest beat wins whatever the order a batch applies them in (a replay batches differently than live).
    "job_running": (("RunStarted",), f"""
        UPDATE jobs SET status = CASE WHEN job_rank(jobs.status) <= job_rank('running') THEN 'running'
                                      ELSE jobs.status END,
               last_heartbeat = GREATEST(jobs.last_heartbeat, t.at), updated_at = now()
        FROM (SELECT {SUBMISSION} AS id, max({AT}) AS at {events('RunStarted')} GROUP BY 1) AS t
        WHERE jobs.submission_id = t.id
          AND jobs.submission_id = ANY(ARRAY(SELECT {SUBMISSION} {events('RunStarted')}))"""),
    "job_heartbeat": (("RunProgress",), f"""
        UPDATE jobs SET last_heartbeat = GREATEST(jobs.last_heartbeat, t.at)
        FROM (SELECT {SUBMISSION} AS id, max({AT}) AS at {events('RunProgress')} GROUP BY 1) AS t
        WHERE jobs.submission_id = t.id
          AND jobs.submission_id = ANY(ARRAY(SELECT {SUBMISSION} {events('RunProgress')}))"""),
    # one row per harness stage of a completed run; a leaderboard stage scored in the same step takes the score that
    # run_score and secret_run_score would give it (they then find nothing to change)
    "stage_insert": (("RunCompleted",), f"""
        INSERT INTO runs (run_id, stage, submission_id, gpu, secret, passed, result, system, harness_version,
                          start_time, end_time, recorded_seq, score)
        SELECT DISTINCT ON (p.run_id, s.stage)
               p.run_id, s.stage, p.submission_id, p.gpu, p.secret,
               COALESCE((s.ev->'run'->>'success')::bool AND (s.ev->'run'->>'passed')::bool, false), s.ev,
               p.result->'system', COALESCE(NULLIF(s.ev->'harness'->>'version', ''),
                        s.ev->'run'->'result'->>'harness-version', ''),
               NULLIF(s.ev->>'start', '')::timestamptz, NULLIF(s.ev->>'end', '')::timestamptz, e.stream_seq,
               CASE WHEN s.stage = 'leaderboard' THEN
                   CASE WHEN p.secret THEN COALESCE(secret.score, public.score) ELSE public.score END END
        FROM event_archive e CROSS JOIN LATERAL {COMPLETED} CROSS JOIN LATERAL jsonb_each(p.result->'runs') AS s(stage, ev)
        LEFT JOIN ({RUN_SCORES}) AS public ON public.run_id = p.run_id
        LEFT JOIN ({SECRET_SCORES}) AS secret ON secret.submission_id = p.submission_id AND secret.gpu = p.gpu
        WHERE e.event_type = 'RunCompleted' AND e.stream_seq BETWEEN $1 AND $2
          AND ($3::bigint[] IS NULL OR e.stream_seq = ANY($3))
        ORDER BY p.run_id, s.stage, e.stream_seq
        ON CONFLICT (run_id, stage) DO NOTHING"""),
    # a score for a board deleted meanwhile has no board to stand on (the purge took the board's others)
    "score_insert": (("ScoreComputed",), f"""
        INSERT INTO scores (submission_id, gpu, leaderboard_id, user_id, score, secret_score, run_id, submitted_at,
                            recorded_seq)
        SELECT DISTINCT ON ({SUBMISSION}, e.payload->>'gpu') {SUBMISSION}, e.payload->>'gpu', l.id,
               e.payload->>'user_id', (e.payload->>'score')::float8, (e.payload->>'secret_score')::float8,
               e.payload->>'run_id', (e.payload->>'submitted_at')::timestamptz, e.stream_seq
        FROM event_archive e JOIN leaderboards l ON lower(l.name) = lower(e.payload->>'leaderboard')
        WHERE e.event_type = 'ScoreComputed' AND e.stream_seq BETWEEN $1 AND $2
          AND ($3::bigint[] IS NULL OR e.stream_seq = ANY($3))
        ORDER BY {SUBMISSION}, e.payload->>'gpu', e.stream_seq
        ON CONFLICT (submission_id, gpu) DO NOTHING"""),
    "run_score": (("ScoreComputed",), f"""
        WITH t AS MATERIALIZED ({RUN_SCORES})
        UPDATE runs r SET score = t.score FROM t
        WHERE r.run_id = t.run_id AND r.run_id = ANY(ARRAY(SELECT run_id FROM t)) AND r.stage = 'leaderboard'
          AND r.score IS DISTINCT FROM t.score"""),
    # the secret leaderboard stage shows its score too (docs/http-api.md "A user's submissions")
    "secret_run_score": (("ScoreComputed",), f"""
        WITH t AS MATERIALIZED ({SECRET_SCORES})
        UPDATE runs r SET score = t.score FROM t
        WHERE r.submission_id = t.submission_id AND r.submission_id = ANY(ARRAY(SELECT submission_id FROM t))
          AND r.gpu = t.gpu AND r.secret AND r.stage = 'leaderboard' AND r.score IS DISTINCT FROM t.score"""),
    "rank_change": (("LeaderboardRankChanged",), f"""
        INSERT INTO rank_changes (stream_seq, leaderboard, gpu, top, occurred_at)
        SELECT e.stream_seq, e.payload->>'leaderboard', e.payload->>'gpu', e.payload->'top', {AT}
        {events('LeaderboardRankChanged')}
        ON CONFLICT DO NOTHING"""),
}
# The standings of what the step's scores, finishes, reinstatements and deletions touched (standings_sql.py).
STANDING_EVENTS = ("ScoreComputed", "ScoreRevised", "SubmissionDeleted", "SubmissionFinished", "SubmissionReinstated")
STANDING_REFRESH = STANDING_REFRESH_FROM
