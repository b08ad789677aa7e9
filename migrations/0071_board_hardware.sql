-- Scorer state: the hardware each (board, GPU) was first scored on, as the comparable part of the fingerprint
-- (services/scorer/fingerprints.py). A score measured on different hardware is refused where the deployment asks
-- for the same hardware (KB_SAME_HARDWARE) and withdrawn by `kernelbot rejudge --rescore --same-hardware`.
CREATE TABLE scorer_board_hardware (
    leaderboard   TEXT NOT NULL,
    gpu           TEXT NOT NULL,
    hardware      JSONB NOT NULL,
    submission_id BIGINT NOT NULL,
    PRIMARY KEY (leaderboard, gpu)
);
