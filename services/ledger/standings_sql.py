"""The standings projection's one statement (migration 0030; services/ranking/rules.py defines eligible and best)."""

from __future__ import annotations

from services.ranking.rules import SUBMISSION_STANDS, best_first

# The standings of the (board, GPU, user) keys a step's events touched (a score computed or revised, a submission
# deleted, found hacked or reinstated; a deleted board's standings go with it in leaderboard_purge). A key that lost or
# changed a score is recomputed from every score of it that stands; a key the step only added scores to compares its
# standing with the scores the step recorded (scores.recorded_seq), which gives the same row without reading the
# user's whole history (a replay would otherwise read it once per step). Whatever order the events came in, the row
# is the best of what stands now, so the projection is order-tolerant and idempotent. A board's version is the stream
# sequence of the last event that touched it (the same live and replayed); `entries` follows the rows added and
# removed. Gateways drop their cached rankings of a board on its notification. A user banned keeps their standing
# (docs/http-api.md "Admin routes": existing results stay visible).
STEP = "e.stream_seq BETWEEN $1 AND $2 AND ($3::bigint[] IS NULL OR e.stream_seq = ANY($3))"
# The scores a step recorded, those of submissions whose fate changed and those of keys that lost a score are named as
# `= ANY(ARRAY(...))`: they are then found through an index whatever the join plan (a replay joins by hashing, which
# would scan every score and submission once per step, a cost that grows with the history).
STANDING_REFRESH_FROM = f"""
WITH fates AS MATERIALIZED (
    -- submissions whose deletion, hacked finish or reinstatement the step holds
    SELECT (e.payload->>'submission_id')::bigint AS submission_id, e.stream_seq AS seq FROM event_archive e
    WHERE (e.event_type IN ('SubmissionDeleted', 'SubmissionReinstated')
           OR (e.event_type = 'SubmissionFinished' AND e.payload->>'status' = 'hacked')) AND {STEP}
), scored AS MATERIALIZED (
    SELECT (e.payload->>'submission_id')::bigint AS submission_id, e.payload->>'gpu' AS gpu, e.stream_seq AS seq
    FROM event_archive e WHERE e.event_type = 'ScoreComputed' AND {STEP}
), touched AS (
    SELECT l.id AS leaderboard_id, e.payload->>'gpu' AS gpu, e.payload->>'user_id' AS user_id, e.stream_seq AS seq,
           e.event_type = 'ScoreComputed' AS adds
    FROM event_archive e JOIN leaderboards l ON lower(l.name) = lower(e.payload->>'leaderboard')
    WHERE e.event_type IN ('ScoreComputed', 'ScoreRevised') AND {STEP}
    UNION ALL
    SELECT sc.leaderboard_id, sc.gpu, sc.user_id, f.seq, false
    FROM fates f JOIN scores sc ON sc.submission_id = f.submission_id
    WHERE sc.submission_id = ANY(ARRAY(SELECT submission_id FROM fates))
), keys AS MATERIALIZED (
    SELECT leaderboard_id, gpu, user_id, max(seq) AS seq, bool_and(adds) AS only_adds
    FROM touched GROUP BY leaderboard_id, gpu, user_id
), recorded AS MATERIALIZED (
    -- the scores this step recorded that stand, each counted once. Materialized: the archive's estimate for a step
    -- is a few rows, and inlined the planner would look each score up again for every key (54 ms, not 1 ms, live).
    SELECT sc.leaderboard_id, sc.gpu, sc.user_id, sc.submission_id, sc.score, sc.submitted_at, sc.run_id, s.user_name,
           s.file_name, 1 AS runs
    FROM scored x
    JOIN scores sc ON sc.submission_id = x.submission_id AND sc.gpu = x.gpu AND sc.recorded_seq = x.seq
    JOIN submissions s ON s.id = sc.submission_id
    WHERE sc.submission_id = ANY(ARRAY(SELECT submission_id FROM scored))
      AND s.id = ANY(ARRAY(SELECT submission_id FROM scored)) AND {SUBMISSION_STANDS}
), grown AS (
    -- a key the step only added scores to: its standing so far against what was added
    SELECT DISTINCT ON (c.leaderboard_id, c.gpu, c.user_id)
           c.leaderboard_id, c.gpu, c.user_id, c.submission_id, c.score, c.submitted_at, c.run_id, c.user_name,
           c.file_name, sum(c.runs) OVER (PARTITION BY c.leaderboard_id, c.gpu, c.user_id) AS eligible_runs
    FROM (SELECT r.* FROM recorded r JOIN keys k USING (leaderboard_id, gpu, user_id) WHERE k.only_adds
          UNION ALL
          SELECT st.leaderboard_id, st.gpu, st.user_id, st.submission_id, st.score, st.submitted_at, st.run_id,
                 st.user_name, st.file_name, st.eligible_runs
          FROM standings st JOIN keys k USING (leaderboard_id, gpu, user_id) WHERE k.only_adds) AS c
    ORDER BY c.leaderboard_id, c.gpu, c.user_id, {best_first("c")}
), lost AS MATERIALIZED (
    SELECT leaderboard_id, gpu, user_id FROM keys WHERE NOT only_adds
), their_scores AS MATERIALIZED (
    -- every score of the keys that lost or changed one, through scores_user_best (board, GPU, user, ...)
    SELECT sc.* FROM scores sc
    WHERE sc.leaderboard_id = ANY(ARRAY(SELECT DISTINCT leaderboard_id FROM lost))
      AND sc.gpu = ANY(ARRAY(SELECT DISTINCT gpu FROM lost)) AND sc.user_id = ANY(ARRAY(SELECT user_id FROM lost))
), best AS (
    SELECT * FROM grown
    UNION ALL
    -- a key that lost or changed a score: recomputed from every score that stands
    (SELECT DISTINCT ON (sc.leaderboard_id, sc.gpu, sc.user_id)
            sc.leaderboard_id, sc.gpu, sc.user_id, sc.submission_id, sc.score, sc.submitted_at, sc.run_id,
            s.user_name, s.file_name, count(*) OVER (PARTITION BY sc.leaderboard_id, sc.gpu, sc.user_id)
     FROM lost k
     JOIN their_scores sc ON sc.leaderboard_id = k.leaderboard_id AND sc.gpu = k.gpu AND sc.user_id = k.user_id
     JOIN submissions s ON s.id = sc.submission_id
     WHERE s.id = ANY(ARRAY(SELECT submission_id FROM their_scores)) AND {SUBMISSION_STANDS}
     ORDER BY sc.leaderboard_id, sc.gpu, sc.user_id, {best_first("sc")})
), removed AS (
    DELETE FROM standings st USING keys k
    WHERE st.leaderboard_id = k.leaderboard_id AND st.gpu = k.gpu AND st.user_id = k.user_id
      -- NOT IN over columns that are never NULL: one hashed lookup per key, where NOT EXISTS was planned as a scan
      -- of `best` per key (its estimate is a few rows): 3.4 ms per live batch of 1,000 events
      AND (k.leaderboard_id, k.gpu, k.user_id) NOT IN (SELECT leaderboard_id, gpu, user_id FROM best)
    RETURNING st.leaderboard_id, st.gpu
), kept AS (
    INSERT INTO standings AS st (leaderboard_id, gpu, user_id, submission_id, score, submitted_at, run_id, user_name,
                                 file_name, eligible_runs)
    SELECT leaderboard_id, gpu, user_id, submission_id, score, submitted_at, run_id, user_name, file_name,
           eligible_runs FROM best
    ON CONFLICT (leaderboard_id, gpu, user_id) DO UPDATE
    SET submission_id = EXCLUDED.submission_id, score = EXCLUDED.score, submitted_at = EXCLUDED.submitted_at,
        run_id = EXCLUDED.run_id, user_name = EXCLUDED.user_name, file_name = EXCLUDED.file_name,
        eligible_runs = EXCLUDED.eligible_runs
    WHERE (st.submission_id, st.score, st.submitted_at, st.run_id, st.user_name, st.file_name, st.eligible_runs)
          IS DISTINCT FROM (EXCLUDED.submission_id, EXCLUDED.score, EXCLUDED.submitted_at, EXCLUDED.run_id,
                            EXCLUDED.user_name, EXCLUDED.file_name, EXCLUDED.eligible_runs)
    RETURNING st.leaderboard_id, st.gpu, (xmax = 0) AS fresh
), boards AS (
    SELECT b.leaderboard_id, b.gpu, max(b.seq) AS seq,
           (SELECT count(*) FROM kept WHERE kept.fresh AND kept.leaderboard_id = b.leaderboard_id
                                        AND kept.gpu = b.gpu)
         - (SELECT count(*) FROM removed r WHERE r.leaderboard_id = b.leaderboard_id AND r.gpu = b.gpu) AS delta
    FROM keys b GROUP BY b.leaderboard_id, b.gpu
), versions AS (
    INSERT INTO standing_versions AS v (leaderboard_id, gpu, version, entries)
    SELECT leaderboard_id, gpu, seq, delta FROM boards
    ON CONFLICT (leaderboard_id, gpu) DO UPDATE
    SET version = GREATEST(v.version, EXCLUDED.version), entries = v.entries + EXCLUDED.entries
    RETURNING v.leaderboard_id, v.gpu, v.version
)
SELECT count(pg_notify('kb_standings', json_build_object('board', leaderboard_id, 'gpu', gpu,
                                                         'version', version)::text)) FROM versions
"""
