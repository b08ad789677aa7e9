-- Scorer state: a pre-check clearing that reached the scorer before the acceptance it clears (separate consumers),
-- applied when the acceptance arrives.
CREATE TABLE scorer_precheck_clears (
    submission_id BIGINT PRIMARY KEY,
    change_id     TEXT NOT NULL
);
