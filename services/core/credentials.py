"""The services' one way to turn a presented CLI id into what the read model stores (see schemas.credentials)."""

from __future__ import annotations

from schemas.credentials import cli_id_hash

__all__ = ["cli_id_hash"]
