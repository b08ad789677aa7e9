-- The scorer reads a board's top before and after every judging that moves a best: in best-first order, so that read
-- walks the first few rows of this index instead of sorting every user of the board.
CREATE INDEX scorer_best_rank ON scorer_best (leaderboard, gpu, score, submitted_at, submission_id);
