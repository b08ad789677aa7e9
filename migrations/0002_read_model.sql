-- The read model: projections of the event log, rebuilt by replaying it.

CREATE TABLE leaderboards (
    id          SERIAL PRIMARY KEY,
    name        TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    task        JSONB NOT NULL,
    task_hash   TEXT NOT NULL DEFAULT '',
    templates   JSONB NOT NULL DEFAULT '{}',
    gpus        TEXT[] NOT NULL,
    deadline    TIMESTAMPTZ NOT NULL,
    secret_seed BIGINT NOT NULL,
    visibility  TEXT NOT NULL DEFAULT 'public',
    ranking_by  TEXT NOT NULL DEFAULT 'last',
    creator_id  BIGINT NOT NULL DEFAULT 0,
    forum_id    BIGINT NOT NULL DEFAULT -1,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX leaderboards_name_ci ON leaderboards (lower(name));

CREATE TABLE users (
    user_id     TEXT PRIMARY KEY,
    user_name   TEXT NOT NULL,
    cli_id      TEXT UNIQUE,
    web_auth_id TEXT UNIQUE,
    banned      BOOLEAN NOT NULL DEFAULT false
);

-- Submission ids are allocated by the producer (gateway, bot) before SubmissionReceived is published.
CREATE SEQUENCE submission_ids;

CREATE TABLE submissions (
    id             BIGINT PRIMARY KEY,
    leaderboard_id INTEGER NOT NULL,
    user_id        TEXT NOT NULL,
    user_name      TEXT NOT NULL,
    file_name      TEXT NOT NULL,
    code           TEXT NOT NULL,
    mode           TEXT NOT NULL,
    gpus           TEXT[] NOT NULL,
    status         TEXT NOT NULL DEFAULT 'received',
    done           BOOLEAN NOT NULL DEFAULT false,
    submitted_at   TIMESTAMPTZ NOT NULL
);
CREATE INDEX submissions_user ON submissions (user_id, submitted_at DESC);
CREATE INDEX submissions_leaderboard ON submissions (leaderboard_id);

-- Job status for polling clients: done is true exactly when status is terminal, updated in one statement.
CREATE TABLE jobs (
    submission_id  BIGINT PRIMARY KEY,
    status         TEXT NOT NULL,
    error          TEXT,
    last_heartbeat TIMESTAMPTZ,
    updated_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- One row per planned run (one payload sent to one GPU), for queue visibility.
CREATE TABLE run_requests (
    run_id        TEXT PRIMARY KEY,
    submission_id BIGINT NOT NULL,
    gpu           TEXT NOT NULL,
    mode          TEXT NOT NULL,
    secret        BOOLEAN NOT NULL,
    status        TEXT NOT NULL DEFAULT 'queued',
    backend       TEXT,
    job_ref       TEXT,
    error         TEXT,
    requested_at  TIMESTAMPTZ NOT NULL,
    started_at    TIMESTAMPTZ,
    finished_at   TIMESTAMPTZ
);
CREATE INDEX run_requests_submission ON run_requests (submission_id);
CREATE INDEX run_requests_gpu_status ON run_requests (gpu, status);

-- One row per harness stage of a run (test, benchmark, leaderboard, profile.N).
CREATE TABLE runs (
    run_id          TEXT NOT NULL,
    stage           TEXT NOT NULL,
    submission_id   BIGINT NOT NULL,
    gpu             TEXT NOT NULL,
    secret          BOOLEAN NOT NULL,
    passed          BOOLEAN NOT NULL,
    score           DOUBLE PRECISION,
    result          JSONB NOT NULL,
    system          JSONB NOT NULL,
    harness_version TEXT NOT NULL DEFAULT '',
    start_time      TIMESTAMPTZ,
    end_time        TIMESTAMPTZ,
    recorded_seq    BIGINT NOT NULL,
    PRIMARY KEY (run_id, stage)
);
CREATE INDEX runs_submission ON runs (submission_id, recorded_seq);

-- Eligible public scores, one per (submission, GPU); rankings are computed from it.
CREATE TABLE scores (
    submission_id  BIGINT NOT NULL,
    gpu            TEXT NOT NULL,
    leaderboard_id INTEGER NOT NULL,
    user_id        TEXT NOT NULL,
    score          DOUBLE PRECISION NOT NULL,
    secret_score   DOUBLE PRECISION,
    run_id         TEXT NOT NULL,
    submitted_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (submission_id, gpu)
);
CREATE INDEX scores_board ON scores (leaderboard_id, gpu, score);

CREATE TABLE rank_changes (
    stream_seq     BIGINT PRIMARY KEY,
    leaderboard    TEXT NOT NULL,
    gpu            TEXT NOT NULL,
    top            JSONB NOT NULL,
    occurred_at    TIMESTAMPTZ NOT NULL
);

-- Lifecycle order of job and run statuses: projections only ever move a row forward, so the read model is the
-- same whatever order a batch applies its statements in.
CREATE FUNCTION job_rank(status TEXT) RETURNS INTEGER IMMUTABLE LANGUAGE sql AS $$
    SELECT CASE status WHEN 'initial' THEN 0 WHEN 'pending' THEN 1 WHEN 'running' THEN 2 ELSE 3 END
$$;
CREATE FUNCTION run_rank(status TEXT) RETURNS INTEGER IMMUTABLE LANGUAGE sql AS $$
    SELECT CASE status WHEN 'queued' THEN 0 WHEN 'dispatched' THEN 1 WHEN 'running' THEN 2 ELSE 3 END
$$;
