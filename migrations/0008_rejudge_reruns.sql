-- Reruns a rejudge asked for, as the scorer tracks them: a submission's fresh runs, judged once they have all ended.

CREATE TABLE scorer_reruns (
    rejudge_id    TEXT NOT NULL,
    submission_id BIGINT NOT NULL,
    planned_runs  JSONB NOT NULL,
    finished      BOOLEAN NOT NULL DEFAULT false,
    PRIMARY KEY (rejudge_id, submission_id)
);
CREATE INDEX scorer_reruns_open ON scorer_reruns (submission_id) WHERE NOT finished;
