-- leaderboard.runs (0107) gave every stage of one result the id recorded_seq * 8 + the stage's slot. A profile run
-- stores one stage per benchmark case (profile.0, profile.1, ...), as upstream's runs table does, and those all fell
-- in the same slot, so they shared one id; upstream's id is a serial key, one per row. Each profile case now gets an
-- id of its own, in a slot (6) no other stage uses: (recorded_seq * 1024 + case) * 8 + 6, unique up to 1000 cases a
-- run. Every other stage keeps the id it had.

CREATE OR REPLACE VIEW leaderboard.runs AS
SELECT CASE WHEN r.stage ~ '^profile\.[0-9]{1,3}$'
            THEN (r.recorded_seq * 1024 + split_part(r.stage, '.', 2)::bigint) * 8 + 6
            ELSE r.recorded_seq * 8
                 + COALESCE(array_position(ARRAY['test', 'benchmark', 'leaderboard', 'profile'], r.stage), 5) END
           AS id,
       r.submission_id, r.start_time, r.end_time, r.stage AS mode, r.secret, r.gpu AS runner,
       (CASE WHEN s.status <> 'hacked' THEN r.score END)::numeric AS score, r.passed,
       CASE WHEN NOT r.secret THEN NULLIF(r.result -> 'compilation', 'null'::jsonb) END AS compilation,
       CASE WHEN r.secret THEN '{}'::jsonb
            ELSE jsonb_build_object('stdout', r.result -> 'run' -> 'stdout', 'stderr', r.result -> 'run' -> 'stderr',
                                    'success', r.result -> 'run' -> 'success',
                                    'exit_code', r.result -> 'run' -> 'exit_code',
                                    'command', r.result -> 'run' -> 'command',
                                    'duration', r.result -> 'run' -> 'duration') END AS meta,
       CASE WHEN NOT r.secret THEN COALESCE(NULLIF(r.result -> 'run' -> 'result', 'null'::jsonb), '{}'::jsonb)
            ELSE '{}'::jsonb END AS result,
       r.system AS system_info
FROM runs r JOIN submissions s ON s.id = r.submission_id
WHERE NOT s.deleted;
