-- Standings: one row per (leaderboard, GPU, user) holding that user's best eligible score, maintained by the ledger
-- from every event that can change it (services/ranking/rules.py defines eligible and best). A ranking then reads
-- O(limit) rows in rank order instead of recomputing best-per-user over every score of the board.

CREATE TABLE standings (
    leaderboard_id INTEGER NOT NULL,
    gpu            TEXT NOT NULL,
    user_id        TEXT NOT NULL,
    submission_id  BIGINT NOT NULL,
    score          DOUBLE PRECISION NOT NULL,
    submitted_at   TIMESTAMPTZ NOT NULL,
    run_id         TEXT NOT NULL,
    user_name      TEXT NOT NULL,
    file_name      TEXT NOT NULL,
    -- the user's eligible runs on this board and GPU (submission_count with a user_id)
    eligible_runs  INTEGER NOT NULL,
    PRIMARY KEY (leaderboard_id, gpu, user_id)
);
-- rank order; a rank is 1 + the number of standings with a lower score
CREATE INDEX standings_rank ON standings (leaderboard_id, gpu, score, submitted_at, submission_id);
CREATE INDEX standings_submitted ON standings (leaderboard_id, gpu, submitted_at, submission_id);

-- Per (leaderboard, GPU): the stream sequence of the last event that touched its standings (what caches key on), and
-- how many users stand on it.
CREATE TABLE standing_versions (
    leaderboard_id INTEGER NOT NULL,
    gpu            TEXT NOT NULL,
    version        BIGINT NOT NULL,
    entries        INTEGER NOT NULL,
    PRIMARY KEY (leaderboard_id, gpu)
);

-- Recomputing one user's standing reads only that user's scores on the board.
CREATE INDEX scores_user_best ON scores (leaderboard_id, gpu, user_id, score, submitted_at, submission_id);

-- Standings of what was already projected before this migration: built once here, kept by the ledger afterwards.
INSERT INTO standings (leaderboard_id, gpu, user_id, submission_id, score, submitted_at, run_id, user_name, file_name,
                       eligible_runs)
SELECT DISTINCT ON (sc.leaderboard_id, sc.gpu, sc.user_id)
       sc.leaderboard_id, sc.gpu, sc.user_id, sc.submission_id, sc.score, sc.submitted_at, sc.run_id, s.user_name,
       s.file_name, count(*) OVER (PARTITION BY sc.leaderboard_id, sc.gpu, sc.user_id)
FROM scores sc JOIN submissions s ON s.id = sc.submission_id
WHERE s.status <> 'hacked' AND NOT s.deleted AND sc.leaderboard_id IS NOT NULL
ORDER BY sc.leaderboard_id, sc.gpu, sc.user_id, sc.score, sc.submitted_at, sc.submission_id;

INSERT INTO standing_versions (leaderboard_id, gpu, version, entries)
SELECT leaderboard_id, gpu, COALESCE((SELECT max(stream_seq) FROM event_archive), 0), count(*)
FROM standings GROUP BY leaderboard_id, gpu;
