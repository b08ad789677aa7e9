-- State private to the Discord bot: which submissions came through Discord and where their messages live, so a
-- restarted bot resumes every update; and the bot's outbox of Discord calls, decided in the same transaction as
-- the tracking row of the event that caused them and delivered after commit.

CREATE TABLE discord_submissions (
    submission_id       BIGINT PRIMARY KEY,
    user_id             TEXT NOT NULL,
    user_name           TEXT NOT NULL,
    leaderboard         TEXT NOT NULL,
    mode                TEXT NOT NULL,
    gpus                TEXT[] NOT NULL,
    channel_id          BIGINT NOT NULL,
    application_id      BIGINT NOT NULL,
    -- the interaction's webhook token: lets any bot process edit the ephemeral reply for 15 minutes
    interaction_token   TEXT NOT NULL,
    token_issued_at     TIMESTAMPTZ NOT NULL,
    original_message_id BIGINT,
    -- status lines per run id, in the order runs started; rendered into the ephemeral reply
    run_lines           JSONB NOT NULL DEFAULT '{}',
    run_order           TEXT[] NOT NULL DEFAULT '{}',
    final_line          TEXT,
    finished            BOOLEAN NOT NULL DEFAULT false,
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- One private thread per public (non-secret) run of a Discord submission.
CREATE TABLE discord_runs (
    run_id        TEXT PRIMARY KEY,
    submission_id BIGINT NOT NULL,
    gpu           TEXT NOT NULL,
    thread_id     BIGINT,
    -- set before the thread is created: a bot that stopped between creating it and storing its id finds it by name
    thread_requested BOOLEAN NOT NULL DEFAULT false
);
CREATE INDEX discord_runs_submission ON discord_runs (submission_id);

-- Discord calls to make, in order. `nonce` makes a retried post land once (Discord's enforce_nonce).
CREATE TABLE discord_outbox (
    id            BIGSERIAL PRIMARY KEY,
    kind          TEXT NOT NULL,
    submission_id BIGINT,
    body          JSONB NOT NULL DEFAULT '{}',
    attempts      INTEGER NOT NULL DEFAULT 0,
    not_before    TIMESTAMPTZ NOT NULL DEFAULT now(),
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    delivered_at  TIMESTAMPTZ,
    error         TEXT
);
CREATE INDEX discord_outbox_pending ON discord_outbox (id) WHERE delivered_at IS NULL;

