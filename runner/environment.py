"""The environment handed to the harness and to user code (harness.md §8.3): the runner's own environment minus
everything that could be a secret or could redirect Python.

A deny-list rather than an allow-list, because GPU hosts need an open-ended set of driver/toolkit variables
(CUDA_*, NVIDIA_*, HIP_*, ROCR_*, LD_LIBRARY_PATH, TORCH_EXTENSIONS_DIR...) that we cannot enumerate.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# Removed by exact name: the payload itself (it may hold the secret seed) and variables that change what Python
# imports or runs at start-up.
DROPPED_NAMES = frozenset({
    "SUBMISSION_PAYLOAD", "GPU_QUEUE", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONINSPECT",
    "PYTHONUSERBASE", "PYTHONBREAKPOINT",
})
# Removed by prefix: our own settings (KB_), protocol variables we set ourselves (POPCORN_), and CI/cloud contexts
# that commonly carry credentials.
DROPPED_PREFIXES = (
    "KB_", "POPCORN_", "AWS_", "GITHUB_", "ACTIONS_", "BUILDKITE", "MODAL_", "GOOGLE_", "AZURE_", "SLURM_JOB_TOKEN",
    "DISCORD", "NATS_", "DATABASE", "POSTGRES", "PG", "REDIS", "HF_", "HUGGING", "WANDB",
)
# Removed when the upper-cased name contains one of these words.
SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "KEY", "AUTH", "COOKIE", "_URL", "_URI",
                "_DSN", "WEBHOOK")


def is_sensitive(name: str, value: str) -> bool:
    upper = name.upper()
    if upper in DROPPED_NAMES or upper.startswith(DROPPED_PREFIXES):
        return True
    if any(word in upper for word in SECRET_WORDS):
        return True
    # Any value that looks like a URL may embed credentials (scheme://user:pass@host) or reach internal services.
    return "://" in value


def scrubbed_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of `base` (default: os.environ) without secrets, tokens, URLs, KB_/POPCORN_ variables or PYTHONPATH."""
    source = os.environ if base is None else base
    return {name: value for name, value in source.items() if not is_sensitive(name, value)}
