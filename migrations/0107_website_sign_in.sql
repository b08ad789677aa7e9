-- The `leaderboard` schema as kernelboard (gpumode.com) uses it, unchanged (docs/operations.md, "Switching from
-- upstream: website"): what the views of 0105 showed differently from upstream's tables, and the two things the
-- website writes.
--
-- * Types as upstream's columns have them: a template's id is an integer, a job's status VARCHAR.
-- * Runs: each row has an id of its own, as upstream's serial key gives (the cases of a profile run, profile.N,
--   each in a slot no other stage uses, up to 1000 cases a run); a score is NUMERIC as upstream's column is (the
--   website's JSON gives it as a string); a run that had no compilation step has SQL NULL there, not JSON null (the
--   website calls .get on whatever is not NULL); a public run shows its result map in every stage, the ranked one
--   included, as upstream's table holds it.
-- * Practice boards (leaderboards.practice, 0106) are left out of the board views unless the reading session sets
--   `kernelbot.practice_boards` to `shown` (for the website's role: ALTER ROLE ... SET, or in its DATABASE_URL).
-- * user_info is a table: the website signs people in by writing a web id into it and reads it back, as upstream's
--   website does. The platform keeps each user's id, name and ban in it (triggers below); the website may write
--   only id, user_name and web_auth_id. Its web ids are accepted on the submit route only, by their digest, which a
--   trigger keeps beside them (services/core/readmodel/user_reads.py).

DROP VIEW leaderboard.runs;
CREATE VIEW leaderboard.runs AS
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
CREATE TRIGGER read_only INSTEAD OF INSERT OR UPDATE OR DELETE ON leaderboard.runs
    FOR EACH ROW EXECUTE FUNCTION leaderboard.refuse_write();

CREATE FUNCTION leaderboard.board_shown(practice boolean) RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT NOT practice OR coalesce(current_setting('kernelbot.practice_boards', true), '') = 'shown'
$$;

CREATE OR REPLACE VIEW leaderboard.leaderboard AS
SELECT l.id, l.name, l.deadline, l.task, l.creator_id, l.forum_id, l.description, l.visibility
FROM leaderboards l
WHERE leaderboard.board_shown(l.practice);

CREATE OR REPLACE VIEW leaderboard.gpu_type AS
SELECT l.id AS leaderboard_id, g.gpu_type
FROM leaderboards l CROSS JOIN LATERAL unnest(l.gpus) AS g(gpu_type)
WHERE leaderboard.board_shown(l.practice);

DROP VIEW leaderboard.templates;
CREATE VIEW leaderboard.templates AS
SELECT (row_number() OVER (ORDER BY l.id, t.lang))::integer AS id, l.id AS leaderboard_id, t.lang, t.code
FROM leaderboards l CROSS JOIN LATERAL jsonb_each_text(l.templates) AS t(lang, code)
WHERE leaderboard.board_shown(l.practice);
CREATE TRIGGER read_only INSTEAD OF INSERT OR UPDATE OR DELETE ON leaderboard.templates
    FOR EACH ROW EXECUTE FUNCTION leaderboard.refuse_write();

DROP VIEW leaderboard.submission_job_status;
CREATE VIEW leaderboard.submission_job_status AS
SELECT j.submission_id AS id, j.submission_id,
       (CASE WHEN j.status = 'initial' THEN 'pending' ELSE j.status END)::varchar(255) AS status,
       j.error, s.submitted_at AS created_at, j.last_heartbeat
FROM jobs j JOIN submissions s ON s.id = j.submission_id
WHERE NOT s.deleted;
CREATE TRIGGER read_only INSTEAD OF INSERT OR UPDATE OR DELETE ON leaderboard.submission_job_status
    FOR EACH ROW EXECUTE FUNCTION leaderboard.refuse_write();

DROP VIEW leaderboard.user_info;
CREATE TABLE leaderboard.user_info (
    id                 TEXT PRIMARY KEY,
    user_name          TEXT,
    created_at         TIMESTAMP DEFAULT now(),
    web_auth_id        VARCHAR(255),
    is_banned          BOOLEAN NOT NULL DEFAULT false,
    web_auth_id_sha256 TEXT
);
CREATE UNIQUE INDEX user_info_web_digest ON leaderboard.user_info (web_auth_id_sha256);

CREATE FUNCTION leaderboard.digest_web_id() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.web_auth_id_sha256 := encode(sha256(convert_to(NEW.web_auth_id, 'UTF8')), 'hex');
    RETURN NEW;
END $$;
CREATE TRIGGER digest BEFORE INSERT OR UPDATE ON leaderboard.user_info
    FOR EACH ROW EXECUTE FUNCTION leaderboard.digest_web_id();

-- Every user the platform knows, with the name and ban it keeps; web ids stay the website's.
CREATE FUNCTION leaderboard.keep_user() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, public AS $$
BEGIN
    INSERT INTO leaderboard.user_info (id, user_name, is_banned) VALUES (NEW.user_id, NEW.user_name, NEW.banned)
    ON CONFLICT (id) DO UPDATE SET user_name = EXCLUDED.user_name, is_banned = EXCLUDED.is_banned
        WHERE (leaderboard.user_info.user_name, leaderboard.user_info.is_banned)
              IS DISTINCT FROM (EXCLUDED.user_name, EXCLUDED.is_banned);
    RETURN NULL;
END $$;
CREATE TRIGGER website_user_info AFTER INSERT OR UPDATE OF user_name, banned ON users
    FOR EACH ROW EXECUTE FUNCTION leaderboard.keep_user();

-- Users known only by their submissions (imported from upstream without an id) carry their latest name.
CREATE FUNCTION leaderboard.keep_submitter() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, public AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM users WHERE user_id = NEW.user_id) THEN
        INSERT INTO leaderboard.user_info (id, user_name) VALUES (NEW.user_id, NEW.user_name)
        ON CONFLICT (id) DO UPDATE SET user_name = EXCLUDED.user_name
            WHERE leaderboard.user_info.user_name IS DISTINCT FROM EXCLUDED.user_name;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER website_user_info AFTER INSERT ON submissions
    FOR EACH ROW EXECUTE FUNCTION leaderboard.keep_submitter();

INSERT INTO leaderboard.user_info (id, user_name, is_banned)
SELECT u.user_id, u.user_name, u.banned FROM users u;
INSERT INTO leaderboard.user_info (id, user_name)
SELECT DISTINCT ON (s.user_id) s.user_id, s.user_name
FROM submissions s
WHERE NOT EXISTS (SELECT 1 FROM users u WHERE u.user_id = s.user_id)
ORDER BY s.user_id, s.submitted_at DESC;
