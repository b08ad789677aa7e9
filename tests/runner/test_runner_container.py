"""The runner image's entry point (`python -m runner.container`) as a real subprocess, publishing to real NATS;
the runner Dockerfile's contents; `kernelbot run-local` through the real CLI."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zlib
from pathlib import Path

import pytest

from problems import PROBLEMS_ROOT
from runner.task.payload import encode_payload
from schemas.contracts import FullResult
from schemas.streams import EVENTS, RUNNER_REPORTS
from services.kit.bus import declare_streams, make_broker

REPO = Path(__file__).resolve().parents[2]
HARNESS = """
import os, sys
out = os.fdopen(int(os.environ["POPCORN_FD"]), "w")
from submission import custom_kernel
out.write("test-count: 1\\ntest.0.status: pass\\nanswer: " + str(custom_kernel(None)) + "\\ncheck: pass\\n")
"""


def container(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    clean = {key: value for key, value in os.environ.items() if not key.startswith("KB_")}
    return subprocess.run([sys.executable, "-m", "runner.container", *args], env={**clean, **env}, cwd=cwd, check=False,
                          capture_output=True, text=True, timeout=120)


def events_of(nats_url: str, stream: str = EVENTS.name) -> list[tuple[str, str, dict]]:
    async def read():
        import nats

        client = await nats.connect(nats_url)
        try:
            js = client.jetstream()
            info = await js.stream_info(stream)
            found = []
            if info.state.messages == 0:
                return found
            for sequence in range(info.state.first_seq, info.state.last_seq + 1):
                message = await js.get_msg(stream, sequence)
                found.append((message.subject, message.headers.get("Nats-Msg-Id"), json.loads(message.data)))
            return found
        finally:
            await client.close()

    return asyncio.run(read())


def declare(nats_url: str) -> None:
    async def go():
        broker = make_broker(nats_url)
        await broker.connect()
        try:
            await declare_streams(broker)
        finally:
            await broker.stop()

    asyncio.run(go())


@pytest.mark.slow
def test_container_runs_the_env_payload_writes_result_json_and_publishes_run_completed_once(
        tiny_payload, nats_url, tmp_path, own_tmpdir):
    declare(nats_url)
    payload = tiny_payload(HARNESS, submission="def custom_kernel(data):\n    return 42\n", run_id="run-77")
    raw = {**payload.model_dump(mode="json"), "submission_id": 77, "leaderboard": "identity_py",
           "backend": "buildkite"}
    encoded = base64.b64encode(zlib.compress(json.dumps(raw).encode())).decode()  # identity beyond the contract
    for _attempt in range(2):  # a redelivered job reports again: the stream keeps one event
        done = container(["--result", str(tmp_path / "result.json")],
                         {"SUBMISSION_PAYLOAD": encoded, "KB_NATS_URL": nats_url, "TMPDIR": str(own_tmpdir)}, tmp_path)
        assert done.returncode == 0, done.stderr
        result = FullResult.model_validate_json((tmp_path / "result.json").read_text())
        assert result.success and result.runs["test"].run.result["answer"] == "42"
    events = events_of(nats_url)
    assert [(subject, message_id) for subject, message_id, _ in events] == [("evt.run.completed",
                                                                              "RunCompleted:run-77")]
    event = events[0][2]
    assert (event["submission_id"], event["leaderboard"], event["backend"], event["correlation_id"]) == \
        (77, "identity_py", "buildkite", "77")
    assert event["result"]["runs"]["test"]["run"]["passed"]
    assert not list(own_tmpdir.glob("kernelbot-payload-*"))


@pytest.mark.slow
def test_a_named_runner_reports_under_its_own_name_with_only_the_run_id(tiny_payload, nats_url, tmp_path):
    declare(nats_url)
    payload = tiny_payload(HARNESS, submission="def custom_kernel(data):\n    return 43\n", run_id="run-78")
    done = container(["--result", str(tmp_path / "result.json")],
                     {"SUBMISSION_PAYLOAD": encode_payload(payload), "KB_NATS_URL": nats_url,
                      "KB_RUNNER_NAME": "acme"}, tmp_path)
    assert done.returncode == 0, done.stderr
    [(subject, message_id, event)] = events_of(nats_url, RUNNER_REPORTS.name)
    # the id ends with a nonce another runner cannot guess (schemas/streams.py runner_report_id)
    assert subject == "runner.acme.run.completed"
    assert re.fullmatch(r"acme:RunCompleted:run-78:[0-9a-f]{32}", message_id), message_id
    assert event["run_id"] == "run-78" and event["result"]["runs"]["test"]["run"]["result"]["answer"] == "43"
    assert events_of(nats_url) == []  # nothing on the event subjects: the dispatcher decides what is recorded


@pytest.mark.slow
def test_container_reads_a_payload_file_deletes_it_and_without_nats_only_writes_the_result(tiny_payload, tmp_path):
    payload_file = tmp_path / "payload.b64"
    payload_file.write_text(encode_payload(tiny_payload(HARNESS, submission="def custom_kernel(d):\n    return 5\n")))
    done = container(["--payload-file", str(payload_file), "--result", "out.json"], {}, tmp_path)
    assert done.returncode == 0, done.stderr
    assert not payload_file.exists()
    assert FullResult.model_validate_json((tmp_path / "out.json").read_text()).runs["test"].run.result["answer"] == "5"


def test_container_reports_an_invalid_payload_in_the_result(tmp_path):
    done = container(["--result", "result.json"], {"SUBMISSION_PAYLOAD": "not a payload"}, tmp_path)
    result = FullResult.model_validate_json((tmp_path / "result.json").read_text())
    assert done.returncode == 0 and not result.success and "invalid payload" in result.error


def test_the_runner_image_holds_everything_its_entry_point_imports(tmp_path):
    """What the Dockerfile copies is enough: the entry point imports with only those directories on the path."""
    dockerfile = (REPO / "deploy" / "runner" / "Dockerfile").read_text()
    assert re.search(r"^FROM nvidia/cuda:", dockerfile, re.MULTILINE)
    assert re.search(r"pip install torch==\d", dockerfile)  # pinned (runner/toolchains/nvidia.toml)
    copies = re.findall(r"^COPY (\S+) /opt/kernelbot/(\S+)$", dockerfile, re.MULTILINE)
    assert copies, dockerfile
    for source, target in copies:
        shutil.copytree(REPO / source, tmp_path / target)
    assert 'ENTRYPOINT ["python", "-m", "runner.container"]' in dockerfile
    # No site processing: the editable install's .pth would put the whole checkout back on the path.
    probe = (f"import sys; sys.path[:0] = [{str(tmp_path)!r}]; sys.path.append({sysconfig.get_paths()['purelib']!r}); "
             "import runner.container, runner.confinement.sandbox, runner.stages.execute; "
             "print(runner.container.__file__)")
    done = subprocess.run([sys.executable, "-S", "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=False,
                          env={"PATH": os.environ["PATH"]})
    assert done.stdout.strip() == str(tmp_path / "runner" / "container.py"), done.stderr


@pytest.mark.parametrize("code, mode, expected_exit, expected", [
    ("vectoradd_py/submission.py", "test", 0, "✅ Testing successful"),
    ("vectoradd_py/solutions/wrong", "test", 1, "❌ Testing failed"),
])
@pytest.mark.slow
def test_run_local_reproduces_a_result_through_the_cli(code, mode, expected_exit, expected):
    path = PROBLEMS_ROOT / "examples" / code
    if path.is_dir():
        path = min(path.glob("*.py"))
    kernelbot = Path(sys.executable).with_name("kernelbot")
    done = subprocess.run([str(kernelbot), "run-local", str(path), "--problem",
                           str(PROBLEMS_ROOT / "examples" / "vectoradd_py"), "--mode", mode],
                          capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == expected_exit, done.stdout + done.stderr
    assert "on local" in done.stdout and expected in done.stdout, done.stdout
    if expected_exit == 0:
        assert "Passed 5/5 tests" in done.stdout, done.stdout


def test_run_local_refuses_an_unknown_mode_and_a_directory_without_task_yml(tmp_path):
    kernelbot = Path(sys.executable).with_name("kernelbot")
    code = tmp_path / "k.py"
    code.write_text("def custom_kernel(data):\n    return data\n")
    done = subprocess.run([str(kernelbot), "run-local", str(code), "--problem", str(tmp_path), "--mode", "fast"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "unknown mode 'fast'" in done.stdout + done.stderr
    done = subprocess.run([str(kernelbot), "run-local", str(code), "--problem", str(tmp_path)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "task.yml" in done.stderr


@pytest.mark.slow
def test_container_forks_every_stage_from_one_warm_runner_of_its_own_unless_told_cold(tiny_payload, tmp_path):
    payload = tiny_payload(HARNESS, mode="leaderboard", benchmarks=[{"size": 1, "seed": 1}])
    starts = {}
    for flag in ([], ["--cold"]):
        payload_file = tmp_path / "payload.json"
        payload_file.write_text(payload.model_dump_json())
        done = container([*flag, "--payload-file", str(payload_file), "--result", "out.json"], {}, tmp_path)
        assert done.returncode == 0, done.stderr
        result = FullResult.model_validate_json((tmp_path / "out.json").read_text())
        assert len(result.runs) >= 2  # the tiny harness passes `test`; whatever ran after it counts too
        starts[" ".join(flag)] = {stage.timing["start"] for stage in result.runs.values()}
    assert starts == {"": {"warm"}, "--cold": {"cold"}}
