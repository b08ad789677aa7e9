-- Exactly-once machinery shared by every consumer: the event archive, per-consumer tracking and the outbox.

CREATE TABLE event_archive (
    stream_seq     BIGINT PRIMARY KEY,
    event_id       TEXT NOT NULL,
    event_type     TEXT NOT NULL,
    subject        TEXT NOT NULL,
    correlation_id TEXT NOT NULL DEFAULT '',
    occurred_at    TIMESTAMPTZ NOT NULL,
    -- when the ledger applied it: the moment it became visible in the read model
    recorded_at    TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    payload        JSONB NOT NULL
);
CREATE INDEX event_archive_correlation ON event_archive (correlation_id);

-- One row per (consumer, stream sequence) applied, written in the same transaction as the state change.
CREATE TABLE tracking (
    consumer   TEXT NOT NULL,
    stream_seq BIGINT NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, stream_seq)
);

-- Events decided inside a transaction, published after commit with their fixed message ids.
CREATE TABLE outbox (
    id         BIGSERIAL PRIMARY KEY,
    message_id TEXT NOT NULL UNIQUE,
    subject    TEXT NOT NULL,
    payload    BYTEA NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
