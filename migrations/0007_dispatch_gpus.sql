-- The GPU catalogue as the running dispatchers announce it, for operators (`kernelbot runners`).
CREATE TABLE dispatch_gpus (
    gpu          TEXT PRIMARY KEY,
    backend      TEXT NOT NULL,
    target       TEXT NOT NULL DEFAULT '',
    arch         TEXT,
    slots        INTEGER NOT NULL,
    announced_by TEXT NOT NULL,
    announced_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Queue depth and running jobs per GPU are counted over the unfinished runs only.
CREATE INDEX dispatch_runs_unfinished ON dispatch_runs (gpu, status) WHERE status <> 'finished';
