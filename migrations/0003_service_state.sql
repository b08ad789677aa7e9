-- State private to the dispatcher and the scorer (never read by clients).

-- The durable run queue: a run is claimed with a lease so replicas share the work and a dead worker's
-- runs are picked up again.
CREATE TABLE dispatch_runs (
    run_id        TEXT PRIMARY KEY,
    submission_id BIGINT NOT NULL,
    gpu           TEXT NOT NULL,
    payload       JSONB NOT NULL,
    timeout_s     INTEGER NOT NULL,
    status        TEXT NOT NULL DEFAULT 'queued',  -- queued | launched | finished
    attempts      INTEGER NOT NULL DEFAULT 0,
    backend       TEXT,
    job_ref       TEXT,
    lease_owner   TEXT,
    lease_until   TIMESTAMPTZ,
    enqueued_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    launched_at   TIMESTAMPTZ,
    finished_at   TIMESTAMPTZ
);
CREATE INDEX dispatch_runs_queue ON dispatch_runs (gpu, status, enqueued_at);

CREATE TABLE scorer_submissions (
    submission_id BIGINT PRIMARY KEY,
    leaderboard   TEXT NOT NULL,
    user_id       TEXT NOT NULL,
    user_name     TEXT NOT NULL,
    mode          TEXT NOT NULL,
    ranking_by    TEXT NOT NULL,
    submitted_at  TIMESTAMPTZ NOT NULL,
    planned_runs  JSONB NOT NULL,
    finished      BOOLEAN NOT NULL DEFAULT false
);

CREATE TABLE scorer_runs (
    run_id        TEXT PRIMARY KEY,
    submission_id BIGINT NOT NULL,
    gpu           TEXT NOT NULL,
    mode          TEXT NOT NULL,
    secret        BOOLEAN NOT NULL,
    outcome       JSONB NOT NULL
);
CREATE INDEX scorer_runs_submission ON scorer_runs (submission_id);

-- The scorer's view of each board's best score per user, to detect changes of the top three.
CREATE TABLE scorer_best (
    leaderboard   TEXT NOT NULL,
    gpu           TEXT NOT NULL,
    user_id       TEXT NOT NULL,
    user_name     TEXT NOT NULL,
    score         DOUBLE PRECISION NOT NULL,
    submission_id BIGINT NOT NULL,
    submitted_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (leaderboard, gpu, user_id)
);
