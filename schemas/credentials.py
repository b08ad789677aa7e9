"""How users' credentials are kept wherever they are stored: as their SHA-256, never in clear.

A CLI id (popcorn-cli's `X-Popcorn-Cli-Id`, the web sign-in) and a web id (`X-Web-Auth-Id`) are bearer credentials.
The read model and the events hold only their digests, so a copy of the database, of a backup or of the event stream
authenticates no one. A plain hash without salt or stretching is enough for ids the platform issues (uuid4,
`secrets.token_urlsafe(24)`); it does not protect an id an operator chose to be short or guessable.
"""

from __future__ import annotations

import hashlib


def cli_id_hash(cli_id: str) -> str:
    """Lowercase hex SHA-256 of the id's UTF-8 bytes: what Postgres computes as
    `encode(sha256(convert_to(cli_id, 'UTF8')), 'hex')` (migration 0090). Web ids are hashed the same way."""
    return hashlib.sha256(cli_id.encode()).hexdigest()


def read_clear_id(data: object) -> object:
    """An event's fields with a clear `cli_id` replaced by its digest (`cli_id_sha256`), also inside its event id,
    and a clear `web_auth_id` by `web_auth_id_sha256`.

    Events recorded before credentials were hashed carry them in clear, and their event id ends with the CLI id.
    Reading them through this, a consumer (the ledger's projection and archive, a replay) never holds a clear id, and
    an event made in code from a clear id is published hashed.
    """
    if not isinstance(data, dict) or ("cli_id" not in data and "web_auth_id" not in data):
        return data
    fields = dict(data)
    if "web_auth_id" in fields:
        web_id = fields.pop("web_auth_id")
        fields.setdefault("web_auth_id_sha256", cli_id_hash(web_id) if isinstance(web_id, str) else None)
    if "cli_id" not in fields:
        return fields
    clear = fields.pop("cli_id")
    if not isinstance(clear, str):
        return fields  # the model then reports the missing digest
    digest = fields.setdefault("cli_id_sha256", cli_id_hash(clear))
    event_id = fields.get("event_id")
    if clear and isinstance(event_id, str) and clear in event_id:
        fields["event_id"] = event_id.replace(clear, digest)
    return fields
