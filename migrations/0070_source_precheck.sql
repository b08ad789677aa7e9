-- The source pre-check (harness.md §8.2): each competition's outcome per rule, each submission's verdict for
-- admins (the rules that fired, and who cleared a false positive), and the scorer's hold on a `hacked` submission.

-- Read model (ledger, from PrecheckPolicySet): rules not named keep their defaults.
CREATE TABLE precheck_policies (
    leaderboard_id INTEGER PRIMARY KEY,
    outcomes       JSONB NOT NULL
);

-- Read model (ledger, from the admission events and PrecheckCleared): one row per submission a rule fired on.
CREATE TABLE precheck_verdicts (
    submission_id BIGINT PRIMARY KEY,
    outcome       TEXT NOT NULL,
    rules         TEXT[] NOT NULL,
    findings      JSONB NOT NULL,
    detail        TEXT NOT NULL,
    decided_at    TIMESTAMPTZ NOT NULL,
    cleared_by    TEXT,
    cleared_at    TIMESTAMPTZ,
    clear_reason  TEXT
);

-- Scorer state: 'hacked' holds the submission off the board; 'cleared' until the rescore that ranks it has run.
ALTER TABLE scorer_submissions ADD COLUMN precheck_hold TEXT;
ALTER TABLE scorer_submissions ADD COLUMN precheck_detail TEXT;
