"""The onboarding guide's smoke test through the runner image's entry point (`python -m runner.container`), without
Docker: its minimal payload in SUBMISSION_PAYLOAD (base64 of zlib JSON) leaves a result.json that says it ran."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from schemas.contracts import FullResult

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
GUIDE_PAYLOAD = {"lang": "py", "mode": "test", "files": {"main.py": "print(\"Hello GPU!\")"}, "tests": [],
                 "benchmarks": []}


def encoded(obj: dict) -> str:
    return base64.b64encode(zlib.compress(json.dumps(obj).encode())).decode()


def entry_point(payload_text: str, workdir: Path) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if not key.startswith("KB_")}
    env.update(SUBMISSION_PAYLOAD=payload_text, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "runner.container", "--result", str(workdir / "result.json")],
                          env=env, cwd=workdir, capture_output=True, text=True, timeout=120, check=False)


def test_the_guide_s_minimal_payload_runs_and_result_json_says_so(tmp_path):
    done = entry_point(encoded(GUIDE_PAYLOAD), tmp_path)
    assert done.returncode == 0, done.stderr
    result = FullResult.model_validate_json((tmp_path / "result.json").read_text())
    assert result.success, result.error
    run = result.runs["test"].run
    assert run.stdout == "Hello GPU!\n"
    assert run.exit_code == 0 and run.passed  # no checker: ran and exited 0 is the smoke test's pass
    assert result.system.runtime  # where it ran (CPU here, CUDA on a vendor's host)
    assert done.stdout.startswith("smoke test passed on ")
    assert "Hello GPU!" in done.stdout


def test_a_smoke_program_that_fails_is_reported_failed(tmp_path):
    payload = {**GUIDE_PAYLOAD, "files": {"main.py": "import sys\nprint('no GPU', file=sys.stderr)\nsys.exit(3)\n"}}
    done = entry_point(encoded(payload), tmp_path)
    assert done.returncode == 0, done.stderr  # a result was written
    result = FullResult.model_validate_json((tmp_path / "result.json").read_text())
    run = result.runs["test"].run
    assert (run.exit_code, run.passed) == (3, False)
    assert done.stdout.startswith("smoke test FAILED") and "no GPU" in done.stdout


def test_a_payload_that_names_its_run_gets_no_defaults(tmp_path):
    """Real runs keep the whole contract: a run_id without gpu, main and sources is refused, not guessed."""
    done = entry_point(encoded({**GUIDE_PAYLOAD, "run_id": "12.H100.test"}), tmp_path)
    assert done.returncode == 0, done.stderr  # the refusal is written as a result, not a crash
    result = FullResult.model_validate_json((tmp_path / "result.json").read_text())
    assert not result.success
    assert result.error.startswith("invalid payload") and "gpu" in result.error
