-- Read-only views in a `leaderboard` schema, shaped as upstream KernelBot's tables, for a website written against
-- them (kernelboard, gpumode.com): it reads boards, GPUs, users, submissions, code, runs and job status through them
-- (docs/operations.md, "Switching from upstream"). Scores appear only where they rank under this platform's rule:
-- a run's score is shown when the scorer published it and its submission is neither hacked nor deleted. CLI and web
-- ids, and secret seeds, are not in any view. Every write is refused with a message saying where writes go.

CREATE SCHEMA IF NOT EXISTS leaderboard;

CREATE VIEW leaderboard.leaderboard AS
SELECT l.id, l.name, l.deadline, l.task, l.creator_id, l.forum_id, l.description, l.visibility
FROM leaderboards l;

CREATE VIEW leaderboard.gpu_type AS
SELECT l.id AS leaderboard_id, g.gpu_type
FROM leaderboards l CROSS JOIN LATERAL unnest(l.gpus) AS g(gpu_type);

CREATE VIEW leaderboard.templates AS
SELECT row_number() OVER (ORDER BY l.id, t.lang) AS id, l.id AS leaderboard_id, t.lang, t.code
FROM leaderboards l CROSS JOIN LATERAL jsonb_each_text(l.templates) AS t(lang, code);

-- Users who can sign in, and those known only by their submissions (imported from upstream without an id).
CREATE VIEW leaderboard.user_info AS
SELECT u.user_id AS id, u.user_name, u.banned AS is_banned
FROM users u
UNION ALL
SELECT latest.user_id, latest.user_name, false
FROM (SELECT DISTINCT ON (s.user_id) s.user_id, s.user_name
      FROM submissions s
      WHERE NOT EXISTS (SELECT 1 FROM users u WHERE u.user_id = s.user_id)
      ORDER BY s.user_id, s.submitted_at DESC) AS latest;

-- A submission's code is its own code file: code_id is the submission's id.
CREATE VIEW leaderboard.submission AS
SELECT s.id, s.leaderboard_id, s.file_name, s.user_id, s.id AS code_id, s.submitted_at AS submission_time, s.done,
       CASE WHEN s.status = 'hacked' THEN 'hacked' ELSE 'active' END AS status,
       CASE WHEN s.mode = 'leaderboard' THEN 'leaderboard' ELSE 'test' END AS mode_category
FROM submissions s
WHERE NOT s.deleted;

CREATE VIEW leaderboard.code_files AS
SELECT s.id, convert_to(s.code, 'UTF8') AS code, encode(sha256(convert_to(s.code, 'UTF8')), 'hex') AS hash
FROM submissions s
WHERE NOT s.deleted;

-- One row per stage of a run, as upstream stores them; the id is made of the run's stream sequence and its stage.
-- What a run printed or measured is shown as the HTTP API shows it (docs/security.md): nothing of a secret run, and
-- the result map of a public run's test and benchmark stages only.
CREATE VIEW leaderboard.runs AS
SELECT r.recorded_seq * 8 + COALESCE(array_position(ARRAY['test', 'benchmark', 'leaderboard', 'profile'], r.stage), 5)
           AS id,
       r.submission_id, r.start_time, r.end_time, r.stage AS mode, r.secret, r.gpu AS runner,
       CASE WHEN s.status <> 'hacked' THEN r.score END AS score, r.passed,
       CASE WHEN NOT r.secret THEN r.result -> 'compilation' END AS compilation,
       CASE WHEN r.secret THEN '{}'::jsonb
            ELSE jsonb_build_object('stdout', r.result -> 'run' -> 'stdout', 'stderr', r.result -> 'run' -> 'stderr',
                                    'success', r.result -> 'run' -> 'success',
                                    'exit_code', r.result -> 'run' -> 'exit_code',
                                    'command', r.result -> 'run' -> 'command',
                                    'duration', r.result -> 'run' -> 'duration') END AS meta,
       CASE WHEN NOT r.secret AND r.stage IN ('test', 'benchmark') THEN r.result -> 'run' -> 'result'
            ELSE '{}'::jsonb END AS result,
       r.system AS system_info
FROM runs r JOIN submissions s ON s.id = r.submission_id
WHERE NOT s.deleted;

CREATE VIEW leaderboard.submission_job_status AS
SELECT j.submission_id AS id, j.submission_id, CASE WHEN j.status = 'initial' THEN 'pending' ELSE j.status END AS status,
       j.error, s.submitted_at AS created_at, j.last_heartbeat
FROM jobs j JOIN submissions s ON s.id = j.submission_id
WHERE NOT s.deleted;

CREATE FUNCTION leaderboard.refuse_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'leaderboard.% is a read-only view of KernelBot''s read model', TG_TABLE_NAME
        USING HINT = 'change it through the HTTP API (a web id: PUT /admin/users/{user_id}/web-auth-id)',
              ERRCODE = 'insufficient_privilege';
END $$;

CREATE TRIGGER read_only INSTEAD OF INSERT OR UPDATE OR DELETE ON leaderboard.leaderboard
    FOR EACH ROW EXECUTE FUNCTION leaderboard.refuse_write();
CREATE TRIGGER read_only INSTEAD OF INSERT OR UPDATE OR DELETE ON leaderboard.gpu_type
    FOR EACH ROW EXECUTE FUNCTION leaderboard.refuse_write();
CREATE TRIGGER read_only INSTEAD OF INSERT OR UPDATE OR DELETE ON leaderboard.templates
    FOR EACH ROW EXECUTE FUNCTION leaderboard.refuse_write();
CREATE TRIGGER read_only INSTEAD OF INSERT OR UPDATE OR DELETE ON leaderboard.user_info
    FOR EACH ROW EXECUTE FUNCTION leaderboard.refuse_write();
CREATE TRIGGER read_only INSTEAD OF INSERT OR UPDATE OR DELETE ON leaderboard.submission
    FOR EACH ROW EXECUTE FUNCTION leaderboard.refuse_write();
CREATE TRIGGER read_only INSTEAD OF INSERT OR UPDATE OR DELETE ON leaderboard.code_files
    FOR EACH ROW EXECUTE FUNCTION leaderboard.refuse_write();
CREATE TRIGGER read_only INSTEAD OF INSERT OR UPDATE OR DELETE ON leaderboard.runs
    FOR EACH ROW EXECUTE FUNCTION leaderboard.refuse_write();
CREATE TRIGGER read_only INSTEAD OF INSERT OR UPDATE OR DELETE ON leaderboard.submission_job_status
    FOR EACH ROW EXECUTE FUNCTION leaderboard.refuse_write();
