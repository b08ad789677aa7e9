-- The submit and poll responses name the backend serving a GPU from its latest run: without this index that
-- lookup reads every run ever requested, on the hot path of every submission.
CREATE INDEX run_requests_gpu_latest ON run_requests (lower(gpu), requested_at DESC) WHERE backend IS NOT NULL;
