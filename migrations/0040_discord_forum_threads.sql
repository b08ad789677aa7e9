-- The forum post of each public leaderboard, so the bot can update it when the board changes and archive it when
-- the board is deleted (and /admin set-forum-ids can record posts made before this table existed).

CREATE TABLE discord_forum_threads (
    leaderboard TEXT PRIMARY KEY,
    thread_id   BIGINT NOT NULL,
    gpus        TEXT[] NOT NULL DEFAULT '{}'
);
