-- CLI ids are bearer credentials: the read model keeps only their SHA-256 (schemas/credentials.py), so that a copy
-- of the database or of a backup taken from now on authenticates no one. Lookups hash the presented id first.
ALTER TABLE users RENAME COLUMN cli_id TO cli_id_sha256;
ALTER TABLE users RENAME CONSTRAINT users_cli_id_key TO users_cli_id_sha256_key;
UPDATE users SET cli_id_sha256 = encode(sha256(convert_to(cli_id_sha256, 'UTF8')), 'hex')
WHERE cli_id_sha256 IS NOT NULL;

-- The archive's user events recorded before this carry the id in clear, in the payload and at the end of the event
-- id: rewrite them the way the ledger now reads such events (the event stream itself still holds them in clear).
UPDATE event_archive
SET payload = (payload - 'cli_id')
              || jsonb_build_object('cli_id_sha256', encode(sha256(convert_to(payload->>'cli_id', 'UTF8')), 'hex')),
    event_id = CASE WHEN payload->>'cli_id' <> ''
                    THEN replace(event_id, payload->>'cli_id',
                                 encode(sha256(convert_to(payload->>'cli_id', 'UTF8')), 'hex'))
                    ELSE event_id END
WHERE event_type IN ('CliUserRegistered', 'OAuthUserRegistered') AND payload ? 'cli_id';
