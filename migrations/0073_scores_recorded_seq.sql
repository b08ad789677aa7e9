-- The stream sequence of the event that recorded each score. A step of the ledger that only adds scores to a user's
-- standing compares the standing with the scores that step recorded, instead of reading every score the user ever
-- had (services/ledger/standings_sql.py): a replay no longer reads each user's whole history once per step. Scores
-- recorded before this migration keep NULL; a step never recorded them, so they never count as new.
ALTER TABLE scores ADD COLUMN recorded_seq BIGINT;
