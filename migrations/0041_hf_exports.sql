-- Scheduled uploads of the open data set (services/operate/hf_schedule.py): when each ran, so that of several
-- gateway replicas one exports per interval.

CREATE TABLE hf_exports (
    id          BIGSERIAL PRIMARY KEY,
    finished_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    repo_id     TEXT NOT NULL,
    filename    TEXT NOT NULL,
    rows        INTEGER NOT NULL DEFAULT 0,
    error       TEXT
);
