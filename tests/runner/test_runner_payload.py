from __future__ import annotations

import base64
import json
import zlib

import pytest

from problems import PROBLEMS_ROOT
from runner.task.payload import PayloadError, build_payload, decode_payload, encode_payload
from runner.task.taskfile import load_problem
from schemas.contracts import SUBMISSION_MARKER, CuConfig, Task


def identity_task() -> Task:
    return load_problem(PROBLEMS_ROOT / "examples" / "identity_py").task


def test_py_payload_carries_every_file_with_the_submission_inlined():
    task = identity_task()
    payload = build_payload(task, "CODE", run_id="r-1", gpu="cpu", mode="private", secret=True, seed=905057207)
    assert payload.main == "eval.py"
    assert set(payload.sources) == set(task.files)
    assert payload.sources["submission.py"] == "CODE"
    assert SUBMISSION_MARKER not in payload.sources.values()
    assert payload.headers == {}
    assert (payload.run_id, payload.gpu, payload.mode, payload.secret, payload.seed) == (
        "r-1", "cpu", "private", True, 905057207)
    assert payload.tests == task.tests and payload.benchmarks == task.benchmarks
    assert (payload.ranking_by, payload.test_timeout, payload.arch) == (task.ranking_by, task.test_timeout, None)


def test_cu_payload_splits_compiled_sources_from_headers():
    task = Task(
        lang="cu",
        files={"eval.cu": "EVAL", "submission.cu": SUBMISSION_MARKER, "reference.cuh": "REF"},
        config=CuConfig(sources=["eval.cu", "submission.cu"], defines={"N": "4"}, include_dirs=["inc"],
                        compile_flags=["-lineinfo"]),
    )
    payload = build_payload(task, "KERNEL", run_id="r", gpu="H100", mode="test", secret=False, seed=None, arch="90a")
    assert payload.sources == {"eval.cu": "EVAL", "submission.cu": "KERNEL"}
    assert payload.headers == {"reference.cuh": "REF"}
    assert (payload.defines, payload.include_dirs, payload.compile_flags) == ({"N": "4"}, ["inc"], ["-lineinfo"])
    assert payload.main is None and payload.arch == "90a"


def test_encoding_is_base64_of_zlib_of_json_and_round_trips():
    payload = build_payload(identity_task(), "print('é')", run_id="r", gpu="cpu", mode="test", secret=False, seed=7)
    encoded = encode_payload(payload)
    raw = json.loads(zlib.decompress(base64.b64decode(encoded, validate=True)))
    assert raw["lang"] == "py" and raw["seed"] == 7 and raw["sources"]["submission.py"] == "print('é')"
    assert decode_payload(encoded) == payload
    assert decode_payload(encoded.encode()) == payload
    wrapped = "\n".join(encoded[i:i + 76] for i in range(0, len(encoded), 76))
    assert decode_payload(wrapped) == payload
    assert decode_payload(json.dumps(raw)) == payload


def test_upstream_shaped_payload_without_new_keys_is_refused_only_for_missing_identity():
    # Our contract requires run_id and gpu; an upstream payload without them is reported clearly.
    with pytest.raises(PayloadError, match="RunPayload contract"):
        decode_payload(json.dumps({"lang": "py", "mode": "test", "main": "eval.py", "sources": {}}))


@pytest.mark.parametrize("garbage", ["not base64 at all!", base64.b64encode(b"not zlib").decode(), "{broken json"])
def test_undecodable_payloads_raise_payload_error(garbage):
    with pytest.raises(PayloadError):
        decode_payload(garbage)
