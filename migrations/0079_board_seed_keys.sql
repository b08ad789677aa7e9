-- Dispatcher state: each board's 256-bit seed key, from which every secret run's seed is derived
-- (services/dispatcher/seeds.py). It is not a projection of the log: a ledger rebuild leaves it alone, so a board
-- keeps its key, and it never leaves the platform (no event, view or export carries it). The dispatcher draws a
-- board's key the first time it plans a secret run for it, existing boards included.
CREATE TABLE dispatch_seed_keys (
    leaderboard_id INTEGER PRIMARY KEY,
    seed_key       BYTEA NOT NULL CHECK (length(seed_key) = 32),
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);
