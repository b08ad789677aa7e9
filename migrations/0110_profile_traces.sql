-- Profile traces (base64 zips of a profiled case, up to tens of MB) kept beside the run instead of inside its
-- RunCompleted event, which NATS bounds at 8 MiB: the dispatcher moves each into this table as it records the run,
-- and the gateway reads them back into the profile route's answer and its download links.
CREATE TABLE profile_traces (
    run_id        TEXT NOT NULL,
    stage         TEXT NOT NULL,
    submission_id BIGINT NOT NULL,
    gpu           TEXT NOT NULL,
    trace         TEXT NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, stage)
);
CREATE INDEX profile_traces_submission ON profile_traces (submission_id, gpu, stage);
