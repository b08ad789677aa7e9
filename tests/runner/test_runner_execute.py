"""The runner procedure with tiny harness scripts (no torch): pipes, timeouts, tampering, environment, CLI, CUDA."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
import time
import zipfile
import zlib
from pathlib import Path

import pytest

import runner.stages.cuda
from problems import PROBLEMS_ROOT
from runner.__main__ import main as runner_main
from runner.stages.cuda import find_nvcc
from runner.stages.execute import execute
from runner.task.payload import encode_payload

PASSING_HARNESS = """
import os, sys
out = os.fdopen(int(os.environ["POPCORN_FD"]), "w")
spec = open(sys.argv[2]).read().strip()
out.write("test-count: 1\\ntest.0.spec: " + spec + "\\ntest.0.status: pass\\ncheck: pass\\n")
"""


def process_state(pid: int) -> str | None:
    """The state letter of a process (Z for zombie), or None when it no longer exists."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def test_passing_stage_records_command_timestamps_and_result(tiny_payload):
    result = execute(tiny_payload(PASSING_HARNESS, tests=[{"size": 127, "seed": 4242}]))
    assert result.success and list(result.runs) == ["test"]
    stage = result.runs["test"]
    assert stage.run.success and stage.run.passed and stage.run.exit_code == 0
    assert stage.run.result["test.0.spec"] == "size: 127; seed: 4242"
    assert stage.run.command.endswith(" harness.py test " + stage.run.command.split(" ")[-1])
    assert stage.start.endswith("+00:00") and stage.end >= stage.start
    assert stage.compilation is None  # the warm-up printed no torch extension line


def test_exit_codes_decide_success(tiny_payload):
    failing = PASSING_HARNESS.replace("status: pass", "status: fail").replace("check: pass", "check: fail")
    run = execute(tiny_payload(failing + "sys.exit(112)\n")).runs["test"].run
    assert run.success and not run.passed and run.exit_code == 112
    run = execute(tiny_payload("import sys\nprint('boom', file=sys.stderr)\nsys.exit(3)\n")).runs["test"].run
    assert not run.success and not run.passed and run.exit_code == 3 and "boom" in run.stderr


def test_timeout_kills_the_whole_process_group(tiny_payload, tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    harness = f"""
    import subprocess, sys, time
    import submission
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    open({str(pid_file)!r}, "w").write(str(child.pid))
    print("spawned", flush=True)
    time.sleep(120)
    """
    started = time.monotonic()
    result = execute(tiny_payload(harness, test_timeout=2))
    assert time.monotonic() - started < 15
    run = result.runs["test"].run
    assert (run.success, run.passed, run.exit_code, run.result, run.duration) == (False, False, 114, {}, 2.0)
    assert "spawned" in run.stdout
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while process_state(grandchild) not in (None, "Z") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process_state(grandchild) in (None, "Z")


def test_large_output_on_every_pipe_does_not_deadlock(tiny_payload):
    # 256 KiB per pipe, interleaved: a runner reading the pipes one after the other would block forever.
    harness = """
    import os, sys
    out = os.fdopen(int(os.environ["POPCORN_FD"]), "w")
    for i in range(4096):
        out.write(f"key.{i}: {'r' * 50}\\n")
        sys.stdout.write(f"stdout line {i} " + "o" * 50 + "\\n")
        sys.stderr.write(f"stderr line {i} " + "e" * 50 + "\\n")
    out.write("test-count: 1\\ntest.0.status: pass\\ncheck: pass\\n")
    """
    started = time.monotonic()
    run = execute(tiny_payload(harness, test_timeout=60)).runs["test"].run
    assert time.monotonic() - started < 20
    assert run.success and run.passed and run.result["key.4095"] == "r" * 50
    for text, name in ((run.stdout, "stdout"), (run.stderr, "stderr")):
        assert len(text) <= 16_384 and text.startswith(f"{name} line 0 ")
        assert text.rsplit("\n", 1)[1].startswith("[...] ") and text.endswith(" lines omitted")


def test_duplicate_result_key_is_tampering(tiny_payload):
    harness = PASSING_HARNESS.replace("check: pass", "test.0.status: pass\\ncheck: pass")
    run = execute(tiny_payload(harness)).runs["test"].run
    assert run.success and not run.passed
    assert run.result["error"] == "result channel tampering" and run.result["check"] == "pass"


def test_seed_and_secrets_reach_the_harness_only_as_intended(tiny_payload, monkeypatch):
    monkeypatch.setenv("KB_DATABASE_URL", "postgres://user:pw@localhost/kb")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_secret")
    monkeypatch.setenv("PYTHONPATH", "/nowhere")
    harness = """
    import json, os
    out = os.fdopen(int(os.environ["POPCORN_FD"]), "w")
    out.write("env: " + json.dumps(sorted(os.environ)) + "\\n")
    out.write("seed: " + os.environ.get("POPCORN_SEED", "none") + "\\n")
    """
    public = execute(tiny_payload(harness)).runs["test"].run.result
    secret = execute(tiny_payload(harness, seed=905057207, mode="private")).runs["test"].run.result
    assert public["seed"] == "none" and secret["seed"] == "905057207"
    names = json.loads(secret["env"])
    assert not [n for n in names if n.startswith("KB_") or n in ("GITHUB_TOKEN", "PYTHONPATH")]
    assert {"PATH", "POPCORN_FD", "POPCORN_DATA_FD"} <= set(names)


def test_chain_stops_after_a_failing_stage(tiny_payload):
    harness = """
    import os, sys
    out = os.fdopen(int(os.environ["POPCORN_FD"]), "w")
    out.write("test-count: 1\\ntest.0.status: fail\\ntest.0.error: nope\\ncheck: fail\\n")
    sys.exit(112)
    """
    result = execute(tiny_payload(harness, mode="leaderboard", benchmarks=[{"size": 2}]))
    assert list(result.runs) == ["test"] and result.runs["test"].run.result["test.0.error"] == "nope"


def test_profile_mode_runs_one_profile_stage_per_benchmark_and_zips_its_report(tiny_payload):
    harness = """
    import base64, os, sys
    out = os.fdopen(int(os.environ["POPCORN_FD"]), "w")
    spec = open(sys.argv[2]).read().strip()
    report = base64.b64encode(("table for " + sys.argv[1] + " " + spec).encode()).decode().replace("/", "*")
    out.write("benchmark-count: 1\\nbenchmark.0.spec: " + spec + "\\nbenchmark.0.report: " + report + "\\ncheck: pass\\n")
    """
    result = execute(tiny_payload(harness, mode="profile", benchmarks=[{"size": 1}, {"size": 2}]))
    assert result.success and list(result.runs) == ["profile.0", "profile.1"]
    for index, stage in enumerate(result.runs.values()):
        assert stage.run.passed and stage.profile.profiler == "torch.profiler"
        with zipfile.ZipFile(io.BytesIO(base64.b64decode(stage.profile.trace))) as archive:
            folder = f"profile.{index}-size-{index + 1}"
            assert archive.read(f"{folder}/torch-details.txt").decode() == f"table for profile size: {index + 1}"
            # a report that is not torch.profiler's table still comes as CSV, one line a row
            assert archive.read(f"{folder}/torch-details.csv").decode().splitlines() == [
                '"Line"', f'"table for profile size: {index + 1}"']


def test_runner_failure_is_a_failed_full_result(tiny_payload):
    result = execute(tiny_payload(PASSING_HARNESS, main="missing.py"))
    assert not result.success and "missing.py" in result.error and result.system.hostname


def test_cli_reads_and_deletes_the_payload_and_writes_the_result(tiny_payload, tmp_path, monkeypatch):
    payload_file = tmp_path / "payload.json"
    payload_file.write_text(encode_payload(tiny_payload(PASSING_HARNESS, seed=5)))
    result_file = tmp_path / "out" / "result.json"
    result_file.parent.mkdir()
    assert runner_main(["--payload", str(payload_file), "--result", str(result_file)]) == 0
    assert not payload_file.exists()
    assert json.loads(result_file.read_text())["runs"]["test"]["run"]["passed"] is True
    assert [p.name for p in result_file.parent.iterdir()] == ["result.json"]  # no temporary left behind

    raw = tiny_payload(PASSING_HARNESS).model_dump_json()
    monkeypatch.setenv("SUBMISSION_PAYLOAD", base64.b64encode(zlib.compress(raw.encode())).decode())
    assert runner_main(["--result", str(result_file)]) == 0
    assert "SUBMISSION_PAYLOAD" not in os.environ
    assert json.loads(result_file.read_text())["success"] is True

    payload_file.write_text("garbage")
    assert runner_main(["--payload", str(payload_file), "--result", str(result_file)]) == 0
    assert json.loads(result_file.read_text())["error"].startswith("invalid payload")


def cu_payload(tiny_payload, kernel: str, **fields):
    return tiny_payload("", lang="cu", main=None, sources={"eval.cu": EVAL_CU, "submission.cu": kernel},
                        headers={"reference.cuh": "#pragma once\nconstexpr int kAnswer = 42;\n"}, arch="80",
                        **fields)


EVAL_CU = r"""
#include <cstdio>
#include <cstdlib>
#include "reference.cuh"
int answer();
int main(int argc, char** argv) {
    const char* fd = std::getenv("POPCORN_FD");
    if (!fd) return 111;
    FILE* out = fdopen(std::atoi(fd), "w");
    // The sources must be gone before the binary runs, so user code cannot read the reference.
    bool sources_gone = !std::fopen("eval.cu", "r") && !std::fopen("submission.cu", "r")
                        && !std::fopen("reference.cuh", "r");
    bool ok = sources_gone && answer() == kAnswer;
    std::fprintf(out, "test-count: 1\ntest.0.spec: cuda\ntest.0.status: %s\ncheck: %s\n",
                 ok ? "pass" : "fail", ok ? "pass" : "fail");
    return ok ? 0 : 112;
}
"""


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
def test_cuda_syntax_error_is_a_failed_compilation(tiny_payload):
    result = execute(cu_payload(tiny_payload, "int answer() { return 42 }\n"))
    assert result.success and list(result.runs) == ["test"]
    stage = result.runs["test"]
    assert stage.run is None
    compilation = stage.compilation
    assert compilation.nvcc_found and not compilation.success and compilation.exit_code != 0
    assert "error" in compilation.stderr and "submission.cu" in compilation.stderr
    assert compilation.command.startswith("nvcc --std=c++20 -DNDEBUG ")
    assert "-gencode=arch=compute_80,code=sm_80 -o eval.out" in compilation.command
    assert "release" in compilation.nvcc_version


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
def test_cuda_host_program_compiles_and_runs_without_its_sources(tiny_payload):
    result = execute(cu_payload(tiny_payload, "int answer() { return 42; }\n"))
    stage = result.runs["test"]
    assert stage.compilation.success, stage.compilation.stderr
    assert stage.run.success and stage.run.passed, (stage.run.stdout, stage.run.stderr, stage.run.result)
    assert stage.run.command.startswith("./eval.out test ")


def test_missing_nvcc_is_reported(tiny_payload, monkeypatch):
    monkeypatch.setattr(runner.stages.cuda, "find_nvcc", lambda: None)
    stage = execute(cu_payload(tiny_payload, "int answer() { return 42; }\n")).runs["test"]
    assert stage.compilation.nvcc_found is False and not stage.compilation.success and stage.run is None


def test_cli_process_hides_an_environment_payload_from_proc(tiny_payload, tmp_path, own_tmpdir):
    # The harness is a child of the runner: neither its own nor its parent's initial environment may hold the payload.
    harness = """
    import os
    out = os.fdopen(int(os.environ["POPCORN_FD"]), "w")
    def read(path):  # in the sandbox (root) the runner's /proc files belong to another uid: closed, not leaked
        try:
            return open(path, "rb").read()
        except OSError:  # or absent: outside its PID namespace the parent has no pid
            return b""
    mine = read("/proc/self/environ")
    parent = read(f"/proc/{os.getppid()}/environ")
    out.write(f"leaked: {b'SUBMISSION_PAYLOAD' in mine + parent or b'POPCORN_SEED=' in parent}\\n")
    out.write("test-count: 1\\ntest.0.status: pass\\ncheck: pass\\n")
    """
    result_file = tmp_path / "result.json"
    env = {**os.environ, "SUBMISSION_PAYLOAD": encode_payload(tiny_payload(harness, seed=77)),
           "TMPDIR": str(own_tmpdir)}
    repo_root = Path(runner.__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-m", "runner", "--result", str(result_file)], cwd=repo_root, env=env,
                   check=True, timeout=60)
    run = json.loads(result_file.read_text())["runs"]["test"]["run"]
    assert run["passed"] and run["result"]["leaked"] == "False"
    assert not list(own_tmpdir.glob("kernelbot-payload-*"))


def test_example_harness_exit_codes_before_any_case_runs(tmp_path):

    harness = str(PROBLEMS_ROOT / "examples" / "eval.py")
    env = {key: value for key, value in os.environ.items() if not key.startswith("POPCORN_")}
    assert subprocess.run([sys.executable, harness], env=env, capture_output=True).returncode == 2
    assert subprocess.run([sys.executable, harness, "bogus", "x"], env=env, capture_output=True).returncode == 2
    assert subprocess.run([sys.executable, harness, "profile", "x"], env=env, capture_output=True).returncode == 111
    cases = tmp_path / "cases.txt"
    cases.write_text("size: 1.5; seed: 3\n")
    assert subprocess.run([sys.executable, harness, "test", str(cases)], env=env, capture_output=True).returncode == 111
    read_end, write_end = os.pipe()
    try:
        done = subprocess.run([sys.executable, harness, "test", str(cases)], env={**env, "POPCORN_FD": str(write_end)},
                              pass_fds=(write_end,), capture_output=True, text=True)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert done.returncode == 113 and "bad case line" in done.stderr
