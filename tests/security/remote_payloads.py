"""Payloads for the remote-runner tests (tests/security): a harness that runs some code, then answers the protocol
with one passing test."""

from __future__ import annotations

from schemas.contracts import RunPayload

PASS_LINES = "test-count: 1\\ntest.0.status: pass\\ncheck: pass\\n"


def payload_running(code: str, run_id: str, gpu: str = "cpu") -> RunPayload:
    """A payload whose harness is `code` followed by a passing protocol answer."""
    harness = code + f"\nimport os\nos.fdopen(int(os.environ['POPCORN_FD']), 'w').write('{PASS_LINES}')\n"
    return RunPayload(run_id=run_id, gpu=gpu, lang="py", mode="test", main="eval.py", sources={"eval.py": harness},
                      tests=[{"size": 1}])


def stdout_of(result: dict) -> str:
    return result["runs"]["test"]["run"]["stdout"]
