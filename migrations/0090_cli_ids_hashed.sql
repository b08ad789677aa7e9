-- CLI ids are bearer credentials: the read model keeps only their SHA-256 (schemas/credentials.py), so that a copy
-- of the database or of a backup taken from now on authenticates no one. Lookups hash the presented id first.
ALTER TABLE users RENAME COLUMN cli_id TO cli_id_sha256;
ALTER TABLE users RENAME CONSTRAINT users_cli_id_key TO users_cli_id_sha256_key;
UPDATE users SET cli_id_sha256 = encode(sha256(convert_to(cli_id_sha256, 'UTF8')), 'hex')
WHERE cli_id_sha256 IS NOT NULL;

-- The archive's user events recorded before this carry the id in clear, in the payload and at the end of their event
-- id (column and payload): rewrite them the way the ledger now reads such events (schemas/credentials.py). The event
-- stream itself still holds them in clear.
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
