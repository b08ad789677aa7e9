"""The chain extension of the harness protocol (runner/launching/chain.py, docs/authoring.md): the stages of one run
in one harness process, each stage's EvalResult as one process per stage gives it.

With tiny chain-speaking scripts (no torch) for the protocol, and with the example harness (problems/examples) on
the bundled problems, cold and forked from a warm runner, compared with one process per stage.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from problems import PROBLEMS_ROOT
from runner.__main__ import main as runner_main
from runner.confinement.sandbox import SandboxPolicy
from runner.stages.execute import execute
from runner.task.payload import build_payload
from runner.task.taskfile import load_problem
from schemas.contracts import FullResult
from services.cli.runners import start_up
from tests.support.warm import warm_runner

# A chain-speaking harness in a few lines: per stage it takes its pipes, writes a passing verdict, prints the stage
# to stdout and answers. EXIT_IN names a stage in which it dies instead (exit code 7).
TINY_CHAIN = """
import json, os, socket, sys
EXIT_IN = {exit_in!r}
control = socket.socket(fileno=int(os.environ.pop("KERNELBOT_HARNESS_CHAIN_FD")))
for item in sys.argv[2:]:
    stage, _, path = item.partition("=")
    message, fds, _, _ = socket.recv_fds(control, 4096, 2)
    if not message:
        break
    print("stage", stage, "pid", os.getpid(), flush=True)
    if stage == EXIT_IN:
        print("dying in", stage, file=sys.stderr, flush=True)
        os._exit(7)
    spec = open(path).read().strip()
    with os.fdopen(fds[0], "w") as out:
        if stage == "test":
            out.write("test-count: 1\\ntest.0.spec: " + spec + "\\ntest.0.status: pass\\ncheck: pass\\n")
        else:
            out.write("benchmark-count: 1\\nbenchmark.0.spec: " + spec + "\\nbenchmark.0.runs: 1\\n"
                      "benchmark.0.mean: 5\\nbenchmark.0.std: 0\\nbenchmark.0.err: 0\\nbenchmark.0.best: 5\\n"
                      "benchmark.0.worst: 5\\ncheck: pass\\n")
    os.close(fds[1])
    control.send(json.dumps({{"stage": stage, "exit": 0}}).encode())
"""


def tiny(tiny_payload, exit_in: str = "", chain: bool = True) -> FullResult:
    payload = tiny_payload(TINY_CHAIN.format(exit_in=exit_in), mode="leaderboard",
                           benchmarks=[{"size": 2, "seed": 3}], benchmark_timeout=30, ranked_timeout=30)
    return execute(payload, chain=chain)


def test_one_process_runs_every_stage_and_each_stage_keeps_its_own_output(tiny_payload):
    result = tiny(tiny_payload)
    assert result.success and list(result.runs) == ["test", "benchmark", "leaderboard"], result
    pids = set()
    for key, stage in result.runs.items():
        run = stage.run
        assert run.success and run.passed and run.exit_code == 0, (key, run)
        lines = run.stdout.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"stage {key} pid "), (key, run.stdout)
        pids.add(lines[0].split()[-1])
        assert run.command.split(" ")[-2] == key  # the command of the stage, as a lone process would have it
        assert (stage.timing.get("chained") == "true") == (key != "test")
        assert stage.start <= stage.end
    assert len(pids) == 1
    assert result.runs["test"].end <= result.runs["benchmark"].start


def test_a_harness_that_dies_in_a_stage_ends_the_chain_with_that_stages_exit_code(tiny_payload):
    result = tiny(tiny_payload, exit_in="benchmark")
    assert list(result.runs) == ["test", "benchmark"]
    assert result.runs["test"].run.passed
    run = result.runs["benchmark"].run
    assert not run.success and not run.passed and run.exit_code == 7 and "dying in benchmark" in run.stderr
    assert run.stdout.startswith("stage benchmark")


def test_without_the_chain_the_same_harness_text_runs_one_process_per_stage(tiny_payload):
    """`chain=False` (and every harness that does not name the chain variable) keeps the per-stage protocol."""
    result = tiny(tiny_payload, chain=False)
    assert list(result.runs) == ["test"] and not result.runs["test"].run.success  # no POPCORN_FD protocol spoken


# ---- the example harness ----------------------------------------------------------------------------------------

VECTORADD = PROBLEMS_ROOT / "examples" / "vectoradd_py"

# Tells its stage by what it left in the run's private temporary directory, and reports its process and parent.
STAGE_AWARE = '''
import os, sys, tempfile
MARKS = os.path.join(tempfile.gettempdir(), "stage-marks")
os.makedirs(MARKS, exist_ok=True)
STAGE = len(os.listdir(MARKS)) if len(sys.argv) >= 3 else -1  # -1: the runner's warm-up step
if STAGE >= 0:
    open(os.path.join(MARKS, str(STAGE)), "w").close()
    print(f"stage {STAGE} worker {os.getpid()} supervisor {os.getppid()} state {getattr(sys, 'kb_state', None)}",
          flush=True)
    sys.kb_state = f"set in stage {STAGE}"
SLEEP_IN = int('SLEEP_IN_VALUE')


def custom_kernel(data):
    if STAGE == SLEEP_IN:
        import time
        time.sleep(600)
    a, b = data
    return a + b
'''


def vectoradd(code: str, mode: str = "leaderboard", warm=None, chain: bool = True, seed: int | None = None,
              **task_fields) -> FullResult:
    task = load_problem(VECTORADD).task
    if task_fields:
        task = task.model_copy(update=task_fields)
    payload = build_payload(task, code, run_id=f"chain-{mode}", gpu="cpu", mode=mode, secret=seed is not None,
                            seed=seed)
    result = execute(payload, sandbox=SandboxPolicy(), warm=warm, chain=chain)
    assert result.success, result.error
    return result


@pytest.fixture(scope="module")
def warm():
    with warm_runner() as (launcher, server):
        yield launcher, server


def comparable(result: FullResult) -> dict:
    """What one process per stage and the chain must agree on: everything but times and measured values."""
    shape = {}
    for key, stage in result.runs.items():
        run = stage.run
        timed = {k for k in run.result if k.startswith("benchmark.") and k.rsplit(".", 1)[1] in (
            "runs", "mean", "std", "err", "best", "worst", "median", "ci_low", "ci_high", "discarded")}
        shape[key] = {"success": run.success, "passed": run.passed, "exit": run.exit_code,
                      "command": run.command.split(" ")[-2], "stdout": run.stdout, "stderr": run.stderr,
                      "result": {k: v for k, v in run.result.items() if k not in timed}, "timed": sorted(timed),
                      "samples": sorted(stage.samples), "harness": stage.harness,
                      "fields": sorted(stage.model_dump(exclude_none=True))}
    return shape


@pytest.mark.slow
@pytest.mark.parametrize("mode,seed", [("leaderboard", None), ("private", 905057207)])
def test_the_chain_gives_the_results_of_one_process_per_stage(warm, mode, seed):
    launcher, _ = warm
    code = (VECTORADD / "submission.py").read_text()
    chained = vectoradd(code, mode, warm=launcher, seed=seed)
    alone = vectoradd(code, mode, warm=launcher, chain=False, seed=seed)
    assert list(chained.runs) == ["test", "benchmark", "leaderboard"]
    assert comparable(chained) == comparable(alone)
    assert [stage.timing.get("chained") for stage in chained.runs.values()] == [None, "true", "true"]
    assert all("chained" not in stage.timing for stage in alone.runs.values())


@pytest.mark.slow
def test_each_stage_gets_a_fresh_worker_under_the_one_supervisor_of_the_run(warm):
    launcher, _ = warm
    for launch in (launcher, None):  # forked from the warm runner, and cold
        result = vectoradd(STAGE_AWARE.replace('SLEEP_IN_VALUE', '-2'), warm=launch)
        lines = {}
        for index, key in enumerate(("test", "benchmark", "leaderboard")):
            run = result.runs[key].run
            assert run.passed, (key, run.stderr)
            printed = [line.split() for line in run.stdout.splitlines() if line.startswith("stage ")]
            assert len(printed) == 1 and printed[0][1] == str(index), (key, run.stdout)  # its own output only
            lines[key] = printed[0]
        assert len({line[3] for line in lines.values()}) == 3  # a fresh worker per stage...
        assert len({line[5] for line in lines.values()}) == 1  # ...under one supervisor
        assert all(" ".join(line[7:]) == "None" for line in lines.values())  # no state from an earlier stage


def test_a_failing_test_stage_stops_the_chain(warm):
    launcher, server = warm
    result = vectoradd((VECTORADD / "solutions" / "wrong" / "subtract.py").read_text(), warm=launcher)
    assert list(result.runs) == ["test"]
    run = result.runs["test"].run
    assert run.success and not run.passed and run.exit_code == 112
    assert _children(server.pid) == []


@pytest.mark.slow
def test_a_timeout_in_the_second_stage_is_that_stages_timeout(warm):
    launcher, server = warm
    result = vectoradd(STAGE_AWARE.replace('SLEEP_IN_VALUE', '1'), warm=launcher, benchmark_timeout=4)
    assert list(result.runs) == ["test", "benchmark"]
    assert result.runs["test"].run.passed
    run = result.runs["benchmark"].run
    assert run.exit_code == 114 and not run.success and not run.passed and run.duration == 4 and run.result == {}
    assert "stage 1 worker" in run.stdout
    assert _children(server.pid) == []  # the whole group was killed and reaped


def _children(pid: int) -> list[str]:
    """The server's children but the next run's sandbox, which it keeps built ahead (bwrap)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and int(open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[1]) == pid \
                    and b"bwrap" not in open(f"/proc/{entry}/cmdline", "rb").read():
                found.append(entry)
        except (OSError, ValueError):
            pass
    return found


@pytest.mark.slow
def test_the_runner_image_entry_point_runs_a_chain_in_one_forked_process(tiny_payload, tmp_path):
    """`python -m runner.container` (Buildkite, GitHub Actions, Slurm) goes through the same execute(): a
    chain-speaking harness runs every stage of the run in one process forked from the container's warm runner."""
    payload = tiny_payload(TINY_CHAIN.format(exit_in=""), mode="leaderboard", benchmarks=[{"size": 2, "seed": 3}])
    (tmp_path / "payload.json").write_text(payload.model_dump_json())
    clean = {key: value for key, value in os.environ.items() if not key.startswith("KB_")}
    done = subprocess.run([sys.executable, "-m", "runner.container", "--payload-file", "payload.json", "--result",
                           "out.json"], env=clean, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = FullResult.model_validate_json((tmp_path / "out.json").read_text())
    assert list(result.runs) == ["test", "benchmark", "leaderboard"] and all(
        stage.run.passed for stage in result.runs.values()), result
    assert {stage.timing["start"] for stage in result.runs.values()} == {"warm"}
    assert [stage.timing.get("chained") for stage in result.runs.values()] == [None, "true", "true"]
    assert len({stage.run.stdout.split()[-1] for stage in result.runs.values()}) == 1  # one harness process


def test_verify_runs_shows_a_chained_stages_start_up_as_such():

    timing = {"process_started": "2026-01-01T00:00:00+00:00", "harness_started": "2026-01-01T00:00:00.012000+00:00",
              "start": "warm"}
    assert start_up(timing) == "start-up 0.012 s (warm)"
    assert start_up({**timing, "chained": "true"}) == "start-up 0.012 s (warm, chained)"


def test_a_runner_host_can_turn_the_chain_off(tiny_payload, tmp_path, monkeypatch):

    payload = tiny_payload(TINY_CHAIN.format(exit_in=""), mode="leaderboard", benchmarks=[{"size": 2, "seed": 3}])
    for switch, stages in (("true", ["test", "benchmark", "leaderboard"]), ("false", ["test"])):
        (tmp_path / "payload.json").write_text(payload.model_dump_json())  # the runner deletes it after reading
        monkeypatch.setenv("KB_HARNESS_CHAIN", switch)
        assert runner_main(["--payload", str(tmp_path / "payload.json"), "--result", str(tmp_path / "out.json")]) == 0
        result = FullResult.model_validate_json((tmp_path / "out.json").read_text())
        assert list(result.runs) == stages  # off: started per stage, the tiny harness finds no POPCORN_FD protocol
