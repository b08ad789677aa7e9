-- Board ids. An import from upstream KernelBot keeps upstream's ids (links such as /leaderboard/N stay valid), and
-- practice boards (the bundled examples, `<dir>-dev` boards, scratch boards) take theirs from a range of their own,
-- far above any id an upstream deployment's serial reaches, so that they never hold one an import needs. The ledger
-- projects both from LeaderboardCreated: its `id` when set, its `practice` flag otherwise choosing the sequence.
-- The practice sequence is owned by leaderboards.id, so a rebuild (TRUNCATE ... RESTART IDENTITY) restarts it too
-- and gives every board the id it had.

ALTER TABLE leaderboards ADD COLUMN practice BOOLEAN NOT NULL DEFAULT false;

CREATE SEQUENCE practice_board_ids AS integer START WITH 1000000000 OWNED BY leaderboards.id;
