-- Idempotent submit (Idempotency-Key on the submit routes): a client that retries after a dropped connection gets the
-- submission its first attempt made, not a second one. Private to the gateway, like oauth_registrations: the key is
-- how the gateway picks a submission id, not a fact about the submission, so it is never an event.
CREATE TABLE submission_keys (
    user_id       TEXT NOT NULL,
    key           TEXT NOT NULL,
    submission_id BIGINT NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, key)
);
