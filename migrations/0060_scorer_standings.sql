-- Scorer state behind scorer_best, so that it is what the ledger's standings are (services/ranking/rules.py): the
-- scores the scorer published, and which submissions left the board. A user whose best leaves gets their next best.

-- Every score the scorer published and has not withdrawn (ScoreComputed, then ScoreRevised): the ledger's `scores`.
CREATE TABLE scorer_scores (
    submission_id BIGINT NOT NULL,
    gpu           TEXT NOT NULL,
    leaderboard   TEXT NOT NULL,
    user_id       TEXT NOT NULL,
    user_name     TEXT NOT NULL,
    score         DOUBLE PRECISION NOT NULL,
    submitted_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (submission_id, gpu)
);
CREATE INDEX scorer_scores_key ON scorer_scores (leaderboard, gpu, user_id);

-- Submissions deleted (SubmissionDeleted), kept whichever of the deletion and the acceptance reached the scorer first
-- (separate consumers).
CREATE TABLE scorer_deleted (
    submission_id BIGINT PRIMARY KEY
);

-- Boards deleted (LeaderboardDeleted), and when: a submission to the board made until then left with it, even one
-- whose acceptance reaches the scorer later; a board created again under the name starts empty.
CREATE TABLE scorer_board_deletions (
    leaderboard TEXT NOT NULL,
    deleted_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (leaderboard, deleted_at)
);

-- What the log says so far (the ledger's archive of it). The new consumers of deletions start from the stream's
-- beginning, so the deletions themselves are applied, and scorer_best refreshed, when the scorer next starts.
INSERT INTO scorer_scores (submission_id, gpu, leaderboard, user_id, user_name, score, submitted_at)
SELECT DISTINCT ON ((payload->>'submission_id')::bigint, payload->>'gpu')
       (payload->>'submission_id')::bigint, payload->>'gpu', payload->>'leaderboard', payload->>'user_id',
       payload->>'user_name', (payload->>'score')::float8, (payload->>'submitted_at')::timestamptz
FROM event_archive WHERE event_type = 'ScoreComputed'
ORDER BY (payload->>'submission_id')::bigint, payload->>'gpu', stream_seq;

-- the last revision of each score: a score of NULL withdrew it
WITH last AS (
    SELECT DISTINCT ON ((payload->>'submission_id')::bigint, payload->>'gpu')
           (payload->>'submission_id')::bigint AS submission_id, payload->>'gpu' AS gpu,
           payload->>'leaderboard' AS leaderboard, payload->>'user_id' AS user_id, payload->>'user_name' AS user_name,
           (payload->>'score')::float8 AS score, (payload->>'submitted_at')::timestamptz AS submitted_at
    FROM event_archive WHERE event_type = 'ScoreRevised'
    ORDER BY (payload->>'submission_id')::bigint, payload->>'gpu', stream_seq DESC
), withdrawn AS (
    DELETE FROM scorer_scores sc USING last
    WHERE sc.submission_id = last.submission_id AND sc.gpu = last.gpu AND last.score IS NULL
)
INSERT INTO scorer_scores (submission_id, gpu, leaderboard, user_id, user_name, score, submitted_at)
SELECT submission_id, gpu, leaderboard, user_id, user_name, score, submitted_at FROM last WHERE score IS NOT NULL
ON CONFLICT (submission_id, gpu) DO UPDATE SET score = EXCLUDED.score;
