#!/usr/bin/env bash
# The runner pipeline's step, run by the GPU agent the build's queue names (deploy/buildkite/pipeline.yml).
#
# It runs at job time on that agent, so CUDA_VISIBLE_DEVICES here is the agent's own (set by its unit,
# buildkite-agent-gpuN), never the value of the agent that uploaded the pipeline. The payload arrives in
# SUBMISSION_PAYLOAD either inline (base64 of zlib JSON) or, when too large for an environment variable (Linux caps
# one at 128 KiB), as a short-lived single-use https URL: it is fetched here, on the host, because the runner
# container has no network. The container sees exactly this agent's GPU and leaves result.json for the artifact.
# With a runner identity in the agent's environment (KB_NATS_URL and KB_RUNNER_NAME, from the optional
# /etc/buildkite-agent/runner.env of its unit), a second container that runs no submitted code then reports the
# result to NATS at once; the artifact stays, and a result arriving both ways is recorded once.
#
# The agent hands every job its credentials (BUILDKITE_AGENT_ACCESS_TOKEN lets a job upload artifacts, change its
# build's metadata and pipeline): none of them is needed here, so all leave this script's environment before
# anything else runs, and the runner container gets no variable of the agent's at all. In the container the runner
# is root with CAP_SYS_ADMIN (AppArmor's docker-default profile would forbid the mounts the sandbox makes, hence
# apparmor=unconfined), which lets the sandbox run user code under a per-run uid that cannot enter /work.
set -euo pipefail

while IFS= read -r name; do
  case "$name" in
    BUILDKITE_*TOKEN*|BUILDKITE_*SECRET*|BUILDKITE_*PASSWORD*|BUILDKITE_*_KEY*|*_ACCESS_TOKEN) unset "$name" ;;
  esac
done < <(compgen -e)

# Fixed, not read from the environment: a build's env must not choose what runs with a GPU on a vendor's host.
# update-image.sh tags the image of this node's family (NVIDIA or AMD) under this one local name.
IMAGE="kernelbot-runner:latest"
# The agent's unit names its GPU: CUDA_VISIBLE_DEVICES on NVIDIA hosts, HIP_/ROCR_VISIBLE_DEVICES on AMD ones.
if [ -n "${HIP_VISIBLE_DEVICES:-}${ROCR_VISIBLE_DEVICES:-}" ]; then
  VENDOR=amd
  GPU="${ROCR_VISIBLE_DEVICES:-$HIP_VISIBLE_DEVICES}"
else
  VENDOR=nvidia
  GPU="${CUDA_VISIBLE_DEVICES:?this agent has no CUDA_VISIBLE_DEVICES: set it up with scripts/buildkite/setup-agent.sh}"
fi
[[ "$GPU" =~ ^[0-9]+$ ]] || { echo "the agent's visible-devices variable must name one GPU index, got '$GPU'" >&2; exit 2; }
if [ "$VENDOR" = amd ]; then
  # An AMD GPU reaches a container as /dev/kfd (shared) plus its own render node: ROCm inside opens only the GPUs
  # whose render node it can open, so the container sees exactly this agent's GPU, as device 0.
  # The render node of this agent's GPU, fixed in its unit by setup-agent.sh (amd-smi's PCI address, then sysfs).
  RENDER="${KERNELBOT_RENDER_NODE:?this AMD agent has no KERNELBOT_RENDER_NODE: set it up again with scripts/buildkite/setup-agent.sh}"
  [[ "$RENDER" =~ ^/dev/dri/renderD[0-9]+$ ]] || { echo "KERNELBOT_RENDER_NODE must be /dev/dri/renderD<N>, got '$RENDER'" >&2; exit 2; }
  DEVICES=(--device /dev/kfd --device "$RENDER" --group-add video)
else
  DEVICES=(--gpus "device=$GPU")
fi
PAYLOAD="${SUBMISSION_PAYLOAD:?no SUBMISSION_PAYLOAD in the build environment}"
unset SUBMISSION_PAYLOAD

WORK="$(mktemp -d "${TMPDIR:-/tmp}/kernelbot-job.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
( umask 077
  case "$PAYLOAD" in
    https://*|http://*) curl --fail --silent --show-error --max-time 120 --output "$WORK/payload.txt" "$PAYLOAD" ;;
    *) printf '%s' "$PAYLOAD" > "$WORK/payload.txt" ;;
  esac )
unset PAYLOAD

status=0
# dockerd, not this agent, creates the container: --cgroup-parent puts it in the agent's slice, so the slice's memory
# and CPU limits bound the run (without it the container would sit under docker's own cgroup, unlimited).
docker run --rm "${DEVICES[@]}" --network none --cap-add SYS_ADMIN --security-opt=apparmor=unconfined \
  --cgroup-parent "buildkite-gpu$GPU.slice" --label "kernelbot.gpu-index=$GPU" --volume "$WORK:/work" \
  "$IMAGE" --payload-file /work/payload.txt --result /work/result.json || status=$?
# The runner wrote as the container's root: hand the directory back to this agent's user to read and remove.
docker run --rm --network none --volume "$WORK:/work" --entrypoint chown "$IMAGE" -R "$(id -u):$(id -g)" /work \
  || echo "could not hand $WORK back to $(id -un)" >&2
if [ -f "$WORK/result.json" ]; then
  cp "$WORK/result.json" ./result.json
  if [ -n "${KB_NATS_URL:-}" ] && [ -n "${KB_RUNNER_NAME:-}" ] && [ -n "${KERNELBOT_RUN_ID:-}" ]; then
    # --env NAME passes the value from this environment: the NATS password never appears on a command line.
    docker run --rm --network host --env KB_NATS_URL --env KB_RUNNER_NAME --volume "$WORK:/work:ro" \
      --entrypoint python "$IMAGE" -m runner.report --run-id "$KERNELBOT_RUN_ID" --result /work/result.json \
      || echo "could not report as runner $KB_RUNNER_NAME; the dispatcher collects result.json instead" >&2
  fi
fi
exit "$status"
