"""The runner entry point in an image built from another manifest than the platform expects: it refuses the run
before any harness starts, in one line, and still writes result.json for the backend to collect."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from runner.task.toolchain import load

REPO = Path(__file__).resolve().parents[2]


def run_container(tmp_path: Path, image_hash: str) -> tuple[subprocess.CompletedProcess, dict]:
    payload = tmp_path / "payload.json"
    payload.write_text(json.dumps({"run_id": "r-1", "gpu": "H100", "lang": "py", "mode": "test",
                                   "toolchain": load("nvidia").expected()}))
    result = tmp_path / "result.json"
    env = {**os.environ, "PYTHONPATH": str(REPO), "KB_TOOLCHAIN": "nvidia", "KB_TOOLCHAIN_SHA256": image_hash}
    done = subprocess.run([sys.executable, "-m", "runner.container", "--cold", "--payload-file", str(payload),
                           "--result", str(result)], env=env, capture_output=True, text=True, timeout=120, check=False)
    return done, json.loads(result.read_text())


def test_a_stale_image_refuses_the_run_in_one_line(tmp_path):
    done, result = run_container(tmp_path, "f" * 64)
    assert done.returncode == 0, done.stderr  # the result was written: the backend collects the refusal
    assert result["success"] is False and result["runs"] == {}
    wanted = load("nvidia").sha256[:12]
    assert result["error"] == (f"runner image toolchain mismatch: this image was built from the nvidia manifest "
                               f"ffffffffffff, the platform expects nvidia {wanted}; pull "
                               f"kernelbot-runner:nvidia-toolchain-{wanted} (deploy/buildkite/update-image.sh)")
    assert done.stderr.strip().splitlines() == [result["error"]]


def test_the_image_of_the_expected_manifest_goes_on_to_run(tmp_path):
    done, result = run_container(tmp_path, load("nvidia").sha256)
    # The run went on to the harness stage (where this bare payload, with no files, fails for its own reasons).
    assert "toolchain" not in result["error"] and result["error"].startswith("runner error: ")
