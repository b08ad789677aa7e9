"""How a payload reaches a runner whose backend carries it in a small field: inline (base64 of zlib JSON) when it
fits, else by reference, as a single-use link on the gateway that the runner fetches (migrations/0050).

GitHub caps a `workflow_dispatch`'s inputs at 65,535 characters together; Linux caps one environment string (a
Buildkite build's SUBMISSION_PAYLOAD) at 128 KiB. A ~1 MB submission of incompressible text fits neither. The
runner side: runner.task.payload.fetch_if_reference (GitHub's workflow), deploy/buildkite/run-job.sh (Buildkite, which
fetches on the host because the runner container has no network). Modal's client uploads large arguments itself
and Slurm passes a file on shared storage, so those two always carry the payload whole.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from runner.task.payload import encode_payload
from schemas.contracts import RunPayload
from services.dispatcher import payload_repository
from services.dispatcher.backends.base import LaunchError
from services.kit.payload_links import link, new_token, token_hash

# Inline limits, below each carrier's cap with room for the other inputs / the variable's name.
GITHUB_INLINE_MAX = 60_000
BUILDKITE_INLINE_MAX = 120_000


@dataclass(frozen=True)
class PayloadLinks:
    """Stores payloads for runners to fetch once through the gateway at `base_url` (KB_PAYLOAD_URL)."""

    pool: asyncpg.Pool
    base_url: str
    ttl_s: float

    async def make(self, encoded: str, launch_key: str) -> str:
        token = new_token()
        await payload_repository.store_payload(self.pool, token_hash(token), launch_key, encoded, self.ttl_s)
        return link(self.base_url, token)


async def carried(payload: RunPayload, launch_key: str, *, limit: int, links: PayloadLinks | None,
                  carrier: str) -> str:
    """The value to put in the backend's field: the encoded payload, or a link to it when it would not fit."""
    encoded = encode_payload(payload)
    if len(encoded) <= limit:
        return encoded
    if links is None:
        raise LaunchError(f"the run payload is {len(encoded)} characters encoded, more than {carrier} holds "
                          f"({limit}); set KB_PAYLOAD_URL to the gateway's public URL so the runner fetches it "
                          f"by reference")
    return await links.make(encoded, launch_key)
