#!/usr/bin/env bash
# Rewrites the lock files the images install from (deploy/requirements/*.txt), with hashes, from PyPI alone: the
# service image's from pyproject.toml's base dependencies (no torch), the runner image's from runner.in (its torch
# comes from the CUDA or ROCm index the image names). Run after changing a dependency; tests/unit/test_dependencies.py
# checks that the locks still satisfy pyproject.toml. Existing pins are kept; `scripts/lock.sh --upgrade` takes the
# newest releases.
set -euo pipefail
cd "$(dirname "$0")/.."
tools="${LOCK_VENV:-/tmp/kernelbot-lock-venv}"
[ -x "$tools/bin/pip-compile" ] || { python3.11 -m venv "$tools" && "$tools/bin/pip" install -q pip-tools; }
# Resolve against PyPI only: a local wheel cache or index would put its own builds (a CPU torch, say) in the lock.
export PIP_CONFIG_FILE=/dev/null
unset PIP_FIND_LINKS PIP_EXTRA_INDEX_URL PIP_CONSTRAINT
compile() { "$tools/bin/pip-compile" -q --generate-hashes --strip-extras --no-header --allow-unsafe "$@"; }
compile "$@" -o deploy/requirements/services.txt pyproject.toml
compile "$@" -o deploy/requirements/runner.txt deploy/requirements/runner.in
