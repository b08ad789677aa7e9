"""CLI ids are hashed wherever they are kept: the digest, and how events recorded with a clear id are read."""

from __future__ import annotations

import hashlib
import json

import pytest

from schemas.auth_events import OAuthUserRegistered
from schemas.credentials import cli_id_hash
from schemas.events import CliUserRegistered
from services.kit.bus import decode, encode
from services.ledger.projections import plan_batch

OLD_ID = "Zx9-old-clear-id"
OLD_WEB = "old-clear-web-id"


def test_the_digest_is_hex_sha256_of_the_utf8_bytes():
    assert cli_id_hash("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    # a header read as latin-1 (the gateway's reading) hashes the same on every path that reads it so
    assert cli_id_hash("caf\u00e9") == hashlib.sha256("caf\u00e9".encode()).hexdigest()
    assert cli_id_hash("a") != cli_id_hash("A") and len(cli_id_hash("")) == 64


def old_registration() -> bytes:
    """A CliUserRegistered as the gateway published it before ids were hashed."""
    return json.dumps({"schema_version": 1, "event_id": f"CliUserRegistered:u1:{OLD_ID}",
                       "occurred_at": "2026-01-01T00:00:00Z", "correlation_id": "", "causation_id": "",
                       "user_id": "u1", "user_name": "ada", "cli_id": OLD_ID, "web_auth_id": OLD_WEB}).encode()


def test_an_event_recorded_with_a_clear_id_is_read_hashed():
    event = decode(CliUserRegistered.subject, old_registration())
    assert isinstance(event, CliUserRegistered)
    assert event.cli_id_sha256 == cli_id_hash(OLD_ID)
    assert event.event_id == f"CliUserRegistered:u1:{cli_id_hash(OLD_ID)}"
    assert event.web_auth_id_sha256 == cli_id_hash(OLD_WEB)
    # what the ledger archives and what a re-publication would carry
    assert OLD_ID not in event.model_dump_json() and OLD_ID not in event.message_id
    assert OLD_WEB not in event.model_dump_json()


def test_an_old_oauth_registration_is_read_hashed():
    old = {"user_id": "42", "user_name": "ada", "cli_id": OLD_ID, "provider": "github", "is_reset": True,
           "event_id": f"OAuthUserRegistered:github:42:{OLD_ID}", "occurred_at": "2026-01-01T00:00:00Z"}
    event = OAuthUserRegistered.model_validate_json(json.dumps(old))
    assert (event.cli_id_sha256, event.is_reset) == (cli_id_hash(OLD_ID), True)
    assert OLD_ID not in event.model_dump_json()


def test_an_event_made_from_a_clear_id_is_published_hashed():
    made = CliUserRegistered(user_id="u1", user_name="ada", cli_id=OLD_ID)  # type: ignore[call-arg]
    assert OLD_ID not in encode(made).decode() and OLD_ID not in made.message_id
    assert made == CliUserRegistered(user_id="u1", user_name="ada", cli_id_sha256=cli_id_hash(OLD_ID),
                                     occurred_at=made.occurred_at)


def test_new_ids_give_new_event_ids_and_a_digest_is_required():
    first = CliUserRegistered(user_id="u1", user_name="ada", cli_id_sha256="a" * 64)
    second = CliUserRegistered(user_id="u1", user_name="ada", cli_id_sha256="b" * 64)
    assert first.message_id != second.message_id
    with pytest.raises(ValueError):
        CliUserRegistered(user_id="u1", user_name="ada")  # type: ignore[call-arg]


def test_the_projection_stores_the_digest_of_an_old_event():
    [plan] = plan_batch([(1, decode(CliUserRegistered.subject, old_registration()))])
    assert plan.rows["user_upsert"] == [("u1", "ada", cli_id_hash(OLD_ID), cli_id_hash(OLD_WEB))]
    # no web id: none is set (the projection keeps one set before)
    [plan] = plan_batch([(2, CliUserRegistered(user_id="u2", user_name="bo", cli_id_sha256="c" * 64))])
    assert plan.rows["user_upsert"] == [("u2", "bo", "c" * 64, None)]
