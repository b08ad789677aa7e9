-- OAuth registration (http-api.md §3.2, §3.3, §8.1).

-- Which provider vouched for a user (NULL: provisioned by an operator); the public user_id stays the bare account
-- id, so an account id of one provider must not take over another provider's user.
ALTER TABLE users ADD COLUMN provider TEXT;

-- Pending registrations: private to the gateway, single-use nonces rather than facts, so they are never events.
-- Keyed by a digest of the pending cli id, which is a bearer secret once the registration completes.
CREATE TABLE oauth_registrations (
    cli_id_digest TEXT PRIMARY KEY,
    provider      TEXT NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at    TIMESTAMPTZ NOT NULL,
    claimed_at    TIMESTAMPTZ
);
CREATE INDEX oauth_registrations_expiry ON oauth_registrations (expires_at);
