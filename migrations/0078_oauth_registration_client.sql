-- OAuth registration bound to the client that started it (docs/security.md, "Registration and web sessions").

-- The address `/auth/init` came from: a callback from elsewhere binds nothing until the person confirms it, and one
-- address cannot hold more than a few pending registrations. NULL (rows from before): never the same address.
ALTER TABLE oauth_registrations ADD COLUMN client_address TEXT;
CREATE INDEX oauth_registrations_unclaimed_by_client ON oauth_registrations (client_address)
    WHERE claimed_at IS NULL;

-- A callback waiting for its person's confirmation: the account the provider vouched for, keyed by a digest of the
-- random token only the confirmation page carries. The CLI id itself is not stored (the confirm form carries the
-- state, and its digest must match); single use, and it lapses with the registration it belongs to.
CREATE TABLE oauth_confirmations (
    token_digest  TEXT PRIMARY KEY,
    cli_id_digest TEXT NOT NULL,
    provider      TEXT NOT NULL,
    user_id       TEXT NOT NULL,
    user_name     TEXT NOT NULL,
    is_reset      BOOLEAN NOT NULL,
    expires_at    TIMESTAMPTZ NOT NULL,
    used_at       TIMESTAMPTZ
);
CREATE INDEX oauth_confirmations_expiry ON oauth_confirmations (expires_at);
