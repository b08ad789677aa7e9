-- What the gateway's views need beyond the spine: deleted submissions, each run's own outcome, a cheap queue count.

-- A deleted submission stays in the log and the read model but leaves every client view and ranking.
ALTER TABLE submissions ADD COLUMN deleted BOOLEAN NOT NULL DEFAULT false;

-- The runner's verdict on the whole run (FullResult.success / .error / .system): a run that failed before any stage
-- has no rows in runs, and a streamed result still shows it.
ALTER TABLE run_requests ADD COLUMN success BOOLEAN;
ALTER TABLE run_requests ADD COLUMN result_error TEXT NOT NULL DEFAULT '';
ALTER TABLE run_requests ADD COLUMN system JSONB;

-- Queue counts read only the jobs that are not finished.
CREATE INDEX jobs_active ON jobs (status) WHERE status IN ('initial', 'pending', 'running');
