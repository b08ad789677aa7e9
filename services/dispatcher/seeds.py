"""Per-run secret seeds, derived in the platform zone from a board's seed key (docs/security.md "Secret seeds").

A secret run's harness may share its process with the submission (a problem's own eval.py), and the Cantor pairing
that such harnesses use to mix seeds is invertible, so whatever seed a run is handed must be assumed to leak to the
submission. Each secret run therefore gets its own seed: HMAC-SHA256 keyed by the board's 256-bit seed key over the
run id. A leaked seed says nothing about another run's, and recovering the key from seeds and run ids means
breaking HMAC-SHA256: a 31-bit key (the board's old `secret_seed`) would fall to a brute force from one leaked seed.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

KEY_BYTES = 32
CONTEXT = b"kernelbot-run-seed:"
# Harnesses take the seed as a signed 32-bit-safe integer and several treat 0 as "no seed": 1 .. 2**31 - 1.
SEED_MODULUS = 2**31 - 1


def new_seed_key() -> bytes:
    return secrets.token_bytes(KEY_BYTES)


def run_seed(seed_key: bytes, run_id: str) -> int:
    """The secret seed of one run: the same for the same run (a relaunch), unrelated across runs."""
    if len(seed_key) != KEY_BYTES:
        raise ValueError(f"a seed key has {KEY_BYTES} bytes, got {len(seed_key)}")
    digest = hmac.new(seed_key, CONTEXT + run_id.encode("utf-8"), hashlib.sha256).digest()
    # 64 bits reduced modulo 2**31 - 1: the bias is below 2**-32
    return int.from_bytes(digest[:8], "big") % SEED_MODULUS + 1
