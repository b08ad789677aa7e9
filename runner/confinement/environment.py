"""The environment handed to the harness and to user code (docs/security.md): only the variables a harness, the
compiler and the GPU stack need, taken from the runner's own environment.

An allow-list: a variable nobody thought of (a new service's URL, an operator's token) never reaches user code.
Driver and toolkit variables are matched by prefix (CUDA_*, NVIDIA_*, HIP_*, ROCR_*, HSA_*, NCCL_*...), and even
those are dropped when their name or value looks like a secret. The runner sets HOME, TMPDIR, the build caches and
the POPCORN_* protocol variables itself.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

ALLOWED_NAMES = frozenset({
    "PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TERM", "USER", "LOGNAME", "SHELL", "LD_LIBRARY_PATH",
    "CC", "CXX", "CUDAHOSTCXX", "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "TORCH_CUDA_ARCH_LIST", "MAX_JOBS",
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE",
    "PYTHONIOENCODING", "PYTHONHASHSEED", "VIRTUAL_ENV",
    # Where the image's C++ headers are (CUTLASS, MathDx, ThunderKittens: runner/toolchains/nvidia.toml).
    "CPLUS_INCLUDE_PATH", "CUTLASS_PATH", "MATHDX_HOME",
})
ALLOWED_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "HIP_", "ROCR_", "ROCM_", "HSA_", "NCCL_", "GPU_DEVICE_ORDINAL",
                    "PYTORCH_")
# Even an allowed variable is dropped when its upper-cased name contains one of these words.
SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "KEY", "AUTH", "COOKIE", "_URL", "_URI",
                "_DSN", "WEBHOOK")


def is_allowed(name: str, value: str) -> bool:
    upper = name.upper()
    if name not in ALLOWED_NAMES and not name.startswith(ALLOWED_PREFIXES):
        return False
    # A value that looks like a URL may embed credentials (scheme://user:pass@host) or reach internal services.
    return not any(word in upper for word in SECRET_WORDS) and "://" not in value


def scrubbed_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allowed variables of `base` (default: os.environ)."""
    source = os.environ if base is None else base
    return {name: value for name, value in source.items() if is_allowed(name, value)}
