#!/usr/bin/env bash
# Prepare the runner on a Slurm cluster's shared storage, once per cluster (and again to update it).
#
#   ./setup-runner-venv.sh /shared/kernelbot [path/to/kernelbot checkout]
#
# Creates /shared/kernelbot/venv with the runner and its requirements, the job script beside it
# (/shared/kernelbot/kernelbot-job.sbatch) and /shared/kernelbot/runs where the dispatcher writes payloads and the
# job leaves result.json. The catalogue then reads
#   slurm: {url: http://slurmrestd:6820, user: kernelbot, shared_dir: /shared/kernelbot/runs,
#           command: "/shared/kernelbot/kernelbot-job.sbatch {payload} {result}"}
set -euo pipefail
SHARED="${1:?usage: setup-runner-venv.sh SHARED_DIR [CHECKOUT]}"
CHECKOUT="${2:-$(cd "$(dirname "$0")/../.." && pwd)}"

python3 -m venv "$SHARED/venv"
"$SHARED/venv/bin/pip" install -q --upgrade pip
"$SHARED/venv/bin/pip" install -q torch numpy triton ninja setuptools "pydantic>=2.7" pyyaml
# Only what a GPU host needs: the runner and the contracts it speaks.
"$SHARED/venv/bin/pip" install -q --no-deps "$CHECKOUT"
install -m 0755 "$CHECKOUT/deploy/slurm/kernelbot-job.sbatch" "$SHARED/kernelbot-job.sbatch"
install -d -m 0770 "$SHARED/runs"
echo "runner ready: $SHARED/kernelbot-job.sbatch {payload} {result}"
