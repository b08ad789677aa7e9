-- A poll's queue estimate reads the last 20 completed runs of its GPU (services/gateway/repository.py QUEUE): from
-- this index it reads those 20, not every completed run the GPU ever had.
CREATE INDEX run_requests_recent_completed ON run_requests (gpu, finished_at DESC)
    WHERE status = 'completed' AND started_at IS NOT NULL;
