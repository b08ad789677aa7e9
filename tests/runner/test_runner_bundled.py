"""End-to-end runs of the bundled Python example problems with the example harness (CPU torch).

Every run needed by this module is executed once, up front and in parallel (each harness stage is a Python process
that imports torch, ~2.5 s apiece), and the tests then inspect the results. Per problem: every `solutions/correct`
file runs a whole ranked chain, every `solutions/wrong` file stops after its failing test stage, and the example
`submission.py` files are checked against their references in one process.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest

from problems import bundled_problem_dirs
from runner.stages.execute import execute
from runner.task.payload import build_payload
from runner.task.taskfile import load_problem, render_case_line
from schemas.contracts import FullResult

pytestmark = pytest.mark.slow

PROBLEMS = {directory.name: directory for directory in bundled_problem_dirs()
            if load_problem(directory).task.lang == "py"}
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
    # The RNG-regeneration exploit: rebuild every input from identity_py's public test cases (task.yml) with its
    # public generator. The worker running this holds neither the case file nor reference.py.
    import torch

    for size, seed in [(1, 4242), (17, 5236), (256, 1001), (4099, 77)]:
        yield torch.randn(size, generator=torch.Generator().manual_seed(seed), dtype=torch.float32)


def custom_kernel(data):
    if SEEN_AT_IMPORT or seed_visible():
        raise RuntimeError("POPCORN_SEED is visible to the submission")
    match = any(bool(guess.shape == data.shape and (guess == data).all()) for guess in public_inputs())
    print(f"public-input-match {match}", flush=True)
    return data.clone()
"""

def solution_modes(problem: str) -> list[tuple[str, str, str]]:
    """(label, code, mode) for every example code of a problem.

    Every `solutions/correct` file runs a whole ranked chain, public (`leaderboard`) on every other problem and
    secret (`private`) on the rest, so both chains are covered without paying for both on every problem (each stage
    is a process importing torch); wrong solutions alternate between test and leaderboard mode (a ranked run of a
    wrong solution is its test stage and then stops)."""
    directory = PROBLEMS[problem]
    ranked_mode = "leaderboard" if sorted(PROBLEMS).index(problem) % 2 == 0 else "private"
    plan = [(f"correct/{path.name}", path.read_text(), ranked_mode)
            for path in sorted(directory.glob("solutions/correct/*.py"))]
    for index, path in enumerate(sorted(directory.glob("solutions/wrong/*.py"))):
        plan.append((f"wrong/{path.name}", path.read_text(), "test" if index % 2 == 0 else "leaderboard"))
    return plan


def planned_runs() -> dict[tuple | str, tuple[str, str, str, int | None]]:
    """run key -> (problem, code, mode, seed)."""
    runs: dict[tuple | str, tuple[str, str, str, int | None]] = {}
    for problem in PROBLEMS:
        for label, code, mode in solution_modes(problem):
            runs[(problem, label)] = (problem, code, mode, SECRET_SEED if mode == "private" else None)
    runs["seed-probe-public"] = ("identity_py", SEED_PROBE, "test", None)
    runs["seed-probe-secret"] = ("identity_py", SEED_PROBE, "test", SECRET_SEED)
    return runs


@pytest.fixture(scope="module")
def results(warm_launcher) -> dict[tuple | str, FullResult]:
    tasks = {name: load_problem(directory).task for name, directory in PROBLEMS.items()}

    def run(item):
        key, (problem, code, mode, seed) = item
        payload = build_payload(tasks[problem], code, run_id=str(key), gpu="cpu", mode=mode,
                                secret=seed is not None, seed=seed)
        return key, execute(payload, warm=warm_launcher)

    # The three-stage ranked runs first, so that no long run is left alone at the end.
    plan = sorted(planned_runs().items(), key=lambda item: item[1][2] == "test")
    with ThreadPoolExecutor(max_workers=max(2, min(4, os.cpu_count() or 2))) as pool:
        return dict(pool.map(run, plan))


def stage_summary(result: FullResult) -> str:
    return "; ".join(f"{key}: success={r.run.success} passed={r.run.passed} exit={r.run.exit_code} "
                     f"result={r.run.result} stderr={r.run.stderr[-1500:]}" for key, r in result.runs.items())


def ranked_codes() -> list[tuple[str, str, str]]:
    return [(problem, label, mode) for problem in sorted(PROBLEMS) for label, _, mode in solution_modes(problem)
            if label.startswith("correct/")]


@pytest.mark.parametrize("problem, label, mode", ranked_codes())
def test_correct_solution_passes_every_ranked_stage(results, problem, label, mode):
    result = results[(problem, label)]
    assert result.success, result.error
    assert list(result.runs) == ["test", "benchmark", "leaderboard"], stage_summary(result)
    task = load_problem(PROBLEMS[problem]).task
    timed_cases = task.benchmarks[-1:] if task.ranking_by == "last" else task.benchmarks
    timed = len(timed_cases)
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
            assert run.result[f"benchmark.{i}.spec"] == render_case_line(timed_cases[i])


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
        assert len(result.runs) == 3, stage_summary(result)
        return
    assert not run.passed and run.exit_code == 112 and run.result["check"] == "fail", stage_summary(result)
    assert run.result[f"test.{statuses.index('fail')}.error"]
    assert list(result.runs) == ["test"]  # in leaderboard mode the chain stops after the failed test stage


def test_the_problems_cover_every_ranking_rule():
    assert {load_problem(directory).task.ranking_by for directory in PROBLEMS.values()} == {"last", "mean", "geom"}


def test_both_ranked_chains_are_covered():
    assert {mode for _, _, mode in ranked_codes()} == {"leaderboard", "private"}


def test_every_problem_has_correct_and_wrong_solutions_covering_both_modes():
    assert {"identity_py", "vectoradd_py", "grayscale_py", "softmax_py", "matmul_py", "prefixsum_py"} <= set(PROBLEMS)
    for problem in PROBLEMS:
        labels = [label for label, _, _ in solution_modes(problem)]
        assert any(label.startswith("correct/") for label in labels), problem
        modes = {mode for label, _, mode in solution_modes(problem) if label.startswith("wrong/")}
        assert modes == {"test", "leaderboard"}, problem


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



CHECK_SUBMISSIONS = """
import json, sys, warnings
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
import torch

def storages(value):
    if isinstance(value, torch.Tensor):
        return {value.untyped_storage().data_ptr()}
    return set().union(*(storages(item) for item in value)) if isinstance(value, (list, tuple)) else set()

def clone(value):
    return value.clone() if isinstance(value, torch.Tensor) else type(value)(clone(item) for item in value)

report = {}
for directory, cases in json.loads(sys.stdin.read()).items():
    for name in ("task", "reference", "utils", "submission"):
        sys.modules.pop(name, None)
    sys.path[:0] = [directory, directory + "/.."]
    import reference, submission
    del sys.path[:2]
    failures = []
    for case in cases:
        pristine = reference.generate_input(**case)
        given = clone(pristine)
        output = submission.custom_kernel(given)
        ok, message = reference.check_implementation(pristine, output)
        if storages(output) & storages(given):
            ok, message = False, "output shares storage with an input"
        if not ok:
            failures.append(f"{case}: {message}")
    report[directory] = failures
print(json.dumps(report))
"""


def test_example_submissions_pass_their_reference_checks():
    """Each problem's submission.py (the starter users are pointed at) is correct on every test and benchmark case.
    Checked in one process against the references, as the harness checks a call, to spare a torch import each."""
    cases = {str(directory): [*load_problem(directory).task.tests, *load_problem(directory).task.benchmarks]
             for directory in PROBLEMS.values()}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(CHECK_SUBMISSIONS)], input=json.dumps(cases),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == {directory: [] for directory in cases}
