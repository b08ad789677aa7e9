-- Two indexes on run_requests that no query reads any more: (gpu, status) from 0002, replaced for queue reads by the
-- partial run_requests_unfinished (0006), and run_requests_gpu_finished (0006), replaced by
-- run_requests_recent_completed (0032). Every run's insert and status change wrote both.
DROP INDEX IF EXISTS run_requests_gpu_status;
DROP INDEX IF EXISTS run_requests_gpu_finished;
