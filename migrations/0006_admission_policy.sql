-- Admission policy (http-api.md §6): the kill switch, rate limits and invites in the read model, and the
-- dispatcher's own record of accepted submissions that rate limits count.

-- One row once intake was ever paused or resumed; no row means intake is open.
CREATE TABLE intake (
    singleton  BOOLEAN PRIMARY KEY DEFAULT true CHECK (singleton),
    accepting  BOOLEAN NOT NULL,
    changed_at TIMESTAMPTZ NOT NULL
);

-- A cleared limit keeps its row (and id) with max NULL, so a set and a clear in one projected batch apply in
-- stream order through one statement.
CREATE TABLE rate_limits (
    id                       SERIAL PRIMARY KEY,
    leaderboard_id           INTEGER NOT NULL,
    mode_category            TEXT NOT NULL,
    max_submissions_per_hour INTEGER,
    UNIQUE (leaderboard_id, mode_category)
);

CREATE TABLE invites (
    code            TEXT PRIMARY KEY,
    leaderboard_ids INTEGER[] NOT NULL,
    user_id         TEXT,
    user_name       TEXT,
    claimed_at      TIMESTAMPTZ,
    created_at      TIMESTAMPTZ NOT NULL
);
CREATE INDEX invites_user ON invites (user_id) WHERE user_id IS NOT NULL;
CREATE INDEX invites_leaderboards ON invites USING gin (leaderboard_ids);

-- The gateway's early rate-limit answer counts a user's recent submissions on a board.
CREATE INDEX submissions_user_board ON submissions (user_id, leaderboard_id, submitted_at);

-- Dispatcher state: every accepted submission, written in the transaction that accepts it, under a lock per
-- (user, leaderboard, category), so two parallel submissions never both take the last slot.
CREATE TABLE admission_accepted (
    submission_id BIGINT PRIMARY KEY,
    leaderboard   TEXT NOT NULL,
    user_id       TEXT NOT NULL,
    category      TEXT NOT NULL,
    accepted_at   TIMESTAMPTZ NOT NULL
);
CREATE INDEX admission_accepted_window ON admission_accepted (user_id, lower(leaderboard), category, accepted_at);

-- Queue counts and positions read only the unfinished runs of a GPU, in request order.
CREATE INDEX run_requests_unfinished ON run_requests (gpu, requested_at) INCLUDE (status, secret)
    WHERE status IN ('queued', 'dispatched', 'running');
-- Queue estimates read the latest finished runs of a GPU.
CREATE INDEX run_requests_gpu_finished ON run_requests (gpu, finished_at DESC) WHERE status = 'completed';
