-- CLI ids and web ids are bearer credentials: the read model keeps only their SHA-256 (schemas/credentials.py), so
-- that a copy of the database or of a backup taken from now on authenticates no one. Lookups hash the presented id.
ALTER TABLE users RENAME COLUMN cli_id TO cli_id_sha256;
ALTER TABLE users RENAME CONSTRAINT users_cli_id_key TO users_cli_id_sha256_key;
ALTER TABLE users RENAME COLUMN web_auth_id TO web_auth_id_sha256;
ALTER TABLE users RENAME CONSTRAINT users_web_auth_id_key TO users_web_auth_id_sha256_key;
UPDATE users SET cli_id_sha256 = encode(sha256(convert_to(cli_id_sha256, 'UTF8')), 'hex'),
                 web_auth_id_sha256 = encode(sha256(convert_to(web_auth_id_sha256, 'UTF8')), 'hex')
WHERE cli_id_sha256 IS NOT NULL OR web_auth_id_sha256 IS NOT NULL;

-- The archive's user events recorded before this carry the CLI id in clear, in the payload and at the end of their
-- event id (column and payload), and a web id in the payload: rewrite them the way the ledger now reads such events
-- (schemas/credentials.py). The event stream itself still holds them in clear.
UPDATE event_archive e
SET payload = (e.payload - 'cli_id') || jsonb_strip_nulls(jsonb_build_object(
                  'cli_id_sha256', h.digest,
                  'event_id', CASE WHEN h.clear <> '' THEN replace(e.payload->>'event_id', h.clear, h.digest)
                                   ELSE e.payload->>'event_id' END)),
    event_id = CASE WHEN h.clear <> '' THEN replace(e.event_id, h.clear, h.digest) ELSE e.event_id END
FROM (SELECT stream_seq, payload->>'cli_id' AS clear,
             encode(sha256(convert_to(payload->>'cli_id', 'UTF8')), 'hex') AS digest
      FROM event_archive
      WHERE event_type IN ('CliUserRegistered', 'OAuthUserRegistered') AND payload ? 'cli_id') AS h
WHERE e.stream_seq = h.stream_seq;
UPDATE event_archive
SET payload = (payload - 'web_auth_id')
              || jsonb_build_object('web_auth_id_sha256',
                                    encode(sha256(convert_to(payload->>'web_auth_id', 'UTF8')), 'hex'))
WHERE event_type = 'CliUserRegistered' AND payload ? 'web_auth_id';
