-- Run payloads too large for their backend's carrier (a GitHub dispatch input, a Buildkite environment variable),
-- handed to the runner by reference: the dispatcher stores the encoded payload here and passes a link instead; the
-- gateway serves it once (GET /runner/payloads/{token}) and deletes it. A payload may carry a secret seed, so only
-- the SHA-256 of the link's random token is kept, and a row lives until it is fetched or expires.
CREATE TABLE runner_payloads (
    token_hash  BYTEA PRIMARY KEY,
    launch_key  TEXT NOT NULL,
    body        TEXT NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX runner_payloads_expiry ON runner_payloads (expires_at);
