"""End-to-end runs of the bundled example problems with the example harness (CPU torch).

Every run needed by this module is executed once, up front and in parallel (each run is a few Python processes
that import torch, ~2.5 s apiece), and the tests then inspect the results.
"""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from problems import bundled_problem_dirs
from runner.execute import execute
from runner.payload import build_payload
from runner.taskfile import load_problem
from schemas.contracts import FullResult

PROBLEMS = {directory.name: directory for directory in bundled_problem_dirs()}
STAT_KEYS = ("runs", "mean", "std", "err", "best", "worst", "median", "ci_low", "ci_high", "timer")
SECRET_SEED = 905057207

SEED_PROBE = """
import os
import sys


def seed_visible():
    # os.environ, and the initial environment block in /proc that unsetting a variable does not erase.
    with open("/proc/self/environ", "rb") as handle:
        return "POPCORN_SEED" in os.environ or b"POPCORN_SEED=" in handle.read()


SEEN_AT_IMPORT = seed_visible()
# The torch-extension marker makes the runner record the warm-up step, so its output can be inspected too.
print(f"-DTORCH_EXTENSION_NAME=probe seen={SEEN_AT_IMPORT}", flush=True)


def public_inputs():
    # The RNG-regeneration exploit: rebuild every input from the public case lines with the reference generator.
    from reference import generate_input

    with open(sys.argv[2]) as handle:
        for line in handle:
            case = dict(part.split(": ") for part in line.strip().split("; "))
            yield generate_input(**{key: int(value) for key, value in case.items()})


def custom_kernel(data):
    if SEEN_AT_IMPORT or seed_visible():
        raise RuntimeError("POPCORN_SEED is visible to the submission")
    match = any(bool(guess.shape == data.shape and (guess == data).all()) for guess in public_inputs())
    print(f"public-input-match {match}", flush=True)
    return data.clone()
"""

FAKE_CHECK_THEN_CONTINUE = """
import os

for fd in range(3, 64):  # guess the result pipe
    try:
        os.write(fd, b"check: pass\\n")
    except OSError:
        pass


def custom_kernel(data):
    return data * 0
"""

FAKE_CHECK_THEN_EXIT = FAKE_CHECK_THEN_CONTINUE + "\nos._exit(0)\n"


def solution_modes(problem: str) -> list[tuple[str, str, str]]:
    """(label, code, mode) for every example solution: correct ones in test mode (the problem's submission.py covers
    the ranked chain), wrong ones alternating between test and leaderboard mode (a ranked run of a wrong solution
    is its test stage and then stops, so both modes are covered without paying for redundant processes)."""
    solutions = PROBLEMS[problem] / "solutions"
    plan = [(f"correct/{path.name}", path.read_text(), "test") for path in sorted(solutions.glob("correct/*.py"))]
    for index, path in enumerate(sorted(solutions.glob("wrong/*.py"))):
        plan.append((f"wrong/{path.name}", path.read_text(), "test" if index % 2 == 0 else "leaderboard"))
    return plan


def planned_runs() -> dict[tuple | str, tuple[str, str, str, int | None]]:
    """run key -> (problem, code, mode, seed)."""
    runs: dict[tuple | str, tuple[str, str, str, int | None]] = {}
    for problem, directory in PROBLEMS.items():
        runs[(problem, "submission.py")] = (problem, (directory / "submission.py").read_text(), "leaderboard", None)
        for label, code, mode in solution_modes(problem):
            runs[(problem, label)] = (problem, code, mode, None)
    runs["seed-probe-public"] = ("identity_py", SEED_PROBE, "test", None)
    runs["seed-probe-secret"] = ("identity_py", SEED_PROBE, "test", SECRET_SEED)
    runs["fake-check-continue"] = ("identity_py", FAKE_CHECK_THEN_CONTINUE, "test", None)
    runs["fake-check-exit"] = ("identity_py", FAKE_CHECK_THEN_EXIT, "test", None)
    return runs


@pytest.fixture(scope="module")
def results() -> dict[tuple | str, FullResult]:
    tasks = {name: load_problem(directory).task for name, directory in PROBLEMS.items()}

    def run(item):
        key, (problem, code, mode, seed) = item
        payload = build_payload(tasks[problem], code, run_id=str(key), gpu="cpu", mode=mode,
                                secret=seed is not None, seed=seed)
        return key, execute(payload)

    with ThreadPoolExecutor(max_workers=max(2, min(4, os.cpu_count() or 2))) as pool:
        return dict(pool.map(run, planned_runs().items()))


def stage_summary(result: FullResult) -> str:
    return "; ".join(f"{key}: success={r.run.success} passed={r.run.passed} exit={r.run.exit_code} "
                     f"result={r.run.result} stderr={r.run.stderr[-1500:]}" for key, r in result.runs.items())


@pytest.mark.parametrize("problem", sorted(PROBLEMS))
def test_correct_submission_passes_every_ranked_stage(results, problem):
    result = results[(problem, "submission.py")]
    assert result.success, result.error
    assert list(result.runs) == ["test", "benchmark", "leaderboard"], stage_summary(result)
    task = load_problem(PROBLEMS[problem]).task
    timed = 1 if task.ranking_by == "last" else len(task.benchmarks)
    for key, stage in result.runs.items():
        run = stage.run
        assert run.success and run.passed and run.exit_code == 0, stage_summary(result)
        assert run.result["harness-version"].startswith("kernelbot-examples ")
        assert stage.harness["version"] == run.result["harness-version"]
        if key == "test":
            assert run.result["test-count"] == str(len(task.tests))
            continue
        assert run.result["benchmark-count"] == str(timed)
        for i in range(timed):
            for stat in STAT_KEYS:  # the keys are benchmark.i.* in the leaderboard stage too
                assert f"benchmark.{i}.{stat}" in run.result
            assert run.result[f"benchmark.{i}.timer"] == "cpu-perf-counter"
            runs = int(run.result[f"benchmark.{i}.runs"])
            assert 10 <= runs <= (200 if key == "benchmark" else 1000)
            assert float(run.result[f"benchmark.{i}.best"]) <= float(run.result[f"benchmark.{i}.median"])
            assert len(stage.samples[f"benchmark.{i}"]["samples_ns"]) == runs
        if task.ranking_by == "last":
            assert run.result["benchmark.0.spec"].startswith(f"size: {task.benchmarks[-1]['size']};")


@pytest.mark.parametrize("problem, label, mode", [
    (problem, label, mode) for problem in sorted(PROBLEMS) for label, _, mode in solution_modes(problem)
])
def test_each_example_solution(results, problem, label, mode):
    result = results[(problem, label)]
    assert result.success, result.error
    task = load_problem(PROBLEMS[problem]).task
    run = result.runs["test"].run
    assert run.success and run.result["test-count"] == str(len(task.tests)), stage_summary(result)
    statuses = [run.result[f"test.{i}.status"] for i in range(len(task.tests))]
    if label.startswith("correct/"):
        assert run.passed and run.exit_code == 0 and statuses == ["pass"] * len(statuses), stage_summary(result)
        return
    assert not run.passed and run.exit_code == 112 and run.result["check"] == "fail", stage_summary(result)
    assert run.result[f"test.{statuses.index('fail')}.error"]
    assert list(result.runs) == ["test"]  # in leaderboard mode the chain stops after the failed test stage


def test_wrong_solutions_cover_both_modes():
    for problem in PROBLEMS:
        modes = {mode for label, _, mode in solution_modes(problem) if label.startswith("wrong/")}
        assert modes == {"test", "leaderboard"}


def test_secret_seed_is_hidden_from_the_submission_and_changes_the_inputs(results):
    public, secret = results["seed-probe-public"], results["seed-probe-secret"]
    for result in (public, secret):
        stage = result.runs["test"]
        assert stage.run.success and stage.run.passed, stage_summary(result)
        assert stage.compilation is not None and "seen=False" in stage.compilation.stdout
        assert "seen=False" in stage.run.stdout
    # Regenerating the inputs from the public case lines works on a public run and fails on a secret one.
    assert re.findall(r"public-input-match (\w+)", public.runs["test"].run.stdout) == ["True"] * 4
    assert re.findall(r"public-input-match (\w+)", secret.runs["test"].run.stdout) == ["False"] * 4
    assert public.runs["test"].run.result["test.0.spec"] == secret.runs["test"].run.result["test.0.spec"]


@pytest.mark.parametrize("variant", ["fake-check-continue", "fake-check-exit"])
def test_forged_check_lines_do_not_pass_a_wrong_submission(results, variant):
    run = results[variant].runs["test"].run
    assert not run.passed, stage_summary(results[variant])
    assert "result channel" in run.result.get("error", "")
