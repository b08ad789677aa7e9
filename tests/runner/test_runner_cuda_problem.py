"""The bundled CUDA problem (problems/cuda_examples/vectoradd_cu) and its eval.cu harness, on a machine with nvcc.

nvcc compiles without a GPU, so these tests check what can be checked here: the problem loads and stays out of the
cpu problem set, the correct submission compiles through the runner's compile step, a syntax error is a failed
compilation, and the harness's host side (exit codes, seed mixing identical to eval.py, the worker started by the
supervisor without the seed, the result pipe or any other descriptor) behaves. Running kernels needs a GPU:
without one the supervisor's first CUDA call exits 110. One build of the worker and one of the supervisor serve
every test of the binaries; the forged-verdict exploit is in test_cuda_result_fd.py.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess

import pytest
import yaml

from problems import PROBLEMS_ROOT
from runner.confinement.environment import scrubbed_environment
from runner.stages.cuda import BINARY_NAME, compile_cuda, find_nvcc
from runner.stages.cuda_supervisor import SUPERVISOR_NAME, compile_supervisor
from runner.stages.execute import execute
from runner.task.payload import build_payload
from runner.task.taskfile import load_problem

pytestmark = pytest.mark.slow

PROBLEM = PROBLEMS_ROOT / "cuda_examples" / "vectoradd_cu"
SECRET = 905057207
needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")

# A third translation unit whose static initializer runs before main, like any user code: it reports what it can
# see of the secret seed and the result pipe.
PROBE = r"""
#include <fcntl.h>
#include <cstdio>
#include <string>
#include <cstdlib>
#include <cstring>
namespace {
bool proc_environ_has(const char* needle) {
    FILE* file = std::fopen("/proc/self/environ", "rb");
    if (!file) return false;
    char buffer[65536];
    size_t size = std::fread(buffer, 1, sizeof buffer - 1, file);
    std::fclose(file);
    for (size_t i = 0; i < size; i += std::strlen(buffer + i) + 1) {
        if (std::strncmp(buffer + i, needle, std::strlen(needle)) == 0) return true;
    }
    return false;
}
std::string open_fds() {
    std::string fds;
    for (int fd = 0; fd < 1024; ++fd) {
        if (fcntl(fd, F_GETFD) != -1) fds += (fds.empty() ? "" : ",") + std::to_string(fd);
    }
    return fds;
}
struct Probe {
    Probe() {
        std::fprintf(stderr, "probe: env_seed=%d proc_seed=%d env_fd=%d fds=%s\n", std::getenv("POPCORN_SEED") != nullptr,
                     proc_environ_has("POPCORN_SEED="), std::getenv("POPCORN_FD") != nullptr, open_fds().c_str());
    }
} probe;
}  // namespace
"""


def load_eval_py():
    # the seeds and limits of the example harness (eval.py runs them from harness_measure.py)
    spec = importlib.util.spec_from_file_location("examples_measure_for_cuda",
                                                  PROBLEMS_ROOT / "examples" / "harness_measure.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cuda_problem_loads_and_lives_in_its_own_competition_file():
    problem = load_problem(PROBLEM)
    assert problem.task.lang == "cu" and problem.gpus == ["H100"] and "CUDA" in problem.templates
    assert problem.task.config.sources == ["submission.cu", "eval.cu"]
    assert set(problem.task.files) == {"submission.cu", "task.cuh", "reference.cuh", "eval.cu"}
    cuda_set = yaml.safe_load((PROBLEMS_ROOT / "cuda_examples.yaml").read_text())
    assert [(entry["name"], entry["directory"], entry["gpus"], entry["deadline"]) for entry in cuda_set["problems"]] \
        == [("vectoradd_cu", "cuda_examples/vectoradd_cu", ["H100"], "2100-12-31")]
    # examples.yaml is what `kernelbot up` loads onto the cpu backend: no CUDA problem there.
    examples = yaml.safe_load((PROBLEMS_ROOT / "examples.yaml").read_text())
    for entry in examples["problems"]:
        assert load_problem(PROBLEMS_ROOT / entry["directory"]).task.lang == "py", entry["name"]


@needs_nvcc
def test_a_syntax_error_is_a_failed_compilation():
    task = load_problem(PROBLEM).task
    code = (PROBLEM / "solutions" / "wrong" / "syntax_error.cu").read_text()
    result = execute(build_payload(task, code, run_id="cu-syntax", gpu="H100", mode="leaderboard", secret=False,
                                   seed=None, arch="90a"))
    assert result.success and list(result.runs) == ["test"]
    stage = result.runs["test"]
    assert stage.run is None and not stage.compilation.success and stage.compilation.exit_code != 0
    assert "submission.cu" in stage.compilation.stderr and "error" in stage.compilation.stderr


@pytest.fixture(scope="module")
def binary(tmp_path_factory):
    """The correct submission plus the probe, compiled by the runner's compile step with the harness self test."""
    if find_nvcc() is None:
        pytest.skip("nvcc is not installed")
    task = load_problem(PROBLEM).task
    payload = build_payload(task, (PROBLEM / "submission.cu").read_text(), run_id="cu-build", gpu="H100",
                            mode="test", secret=False, seed=None, arch="90a")
    payload = payload.model_copy(update={"sources": {**payload.sources, "probe.cu": PROBE},
                                         "defines": {"KERNELBOT_EVAL_SELFTEST": ""}})
    run_dir = tmp_path_factory.mktemp("vectoradd_cu")
    for name, content in {**payload.headers, **payload.sources}.items():
        (run_dir / name).write_text(content)
    compilation = compile_cuda(payload, run_dir, scrubbed_environment())
    supervisor = compile_supervisor(payload, "eval.cu", run_dir, scrubbed_environment())
    assert supervisor.success, supervisor.stderr[-3000:]
    assert "-DKERNELBOT_SUPERVISOR" in supervisor.command and "submission.cu" not in supervisor.command
    return run_dir, compilation


def run_harness(run_dir, *args, env=None, stdin=None, with_fd=True, binary=SUPERVISOR_NAME):
    env = {key: value for key, value in (env or {}).items()}
    env.setdefault("PATH", os.environ.get("PATH", "/usr/bin:/bin"))
    read_end, write_end = os.pipe()
    if with_fd:
        env["POPCORN_FD"] = str(write_end)
    try:
        done = subprocess.run([f"./{binary}", *args], cwd=run_dir, env=env, input=stdin, capture_output=True,
                              text=True, timeout=60, pass_fds=(write_end,), check=False)
    finally:
        os.close(write_end)
        with os.fdopen(read_end) as pipe:
            result = pipe.read()
    return done, result


def test_the_correct_submission_compiles_through_the_runner(binary):
    run_dir, compilation = binary
    assert compilation.nvcc_found and compilation.success, compilation.stderr[-3000:]
    assert compilation.command.startswith("nvcc --std=c++20 -DNDEBUG ")
    assert "-DKERNELBOT_EVAL_SELFTEST" in compilation.command
    assert "-gencode=arch=compute_90a,code=sm_90a -o eval.out" in compilation.command
    assert (run_dir / BINARY_NAME).is_file()


def test_harness_exit_codes_before_any_cuda_call(binary):
    run_dir, compilation = binary
    assert compilation.success
    assert run_harness(run_dir)[0].returncode == 2
    assert run_harness(run_dir, "private", "cases.txt")[0].returncode == 2
    (run_dir / "cases.txt").write_text("size: 5; seed: 1\n")
    assert run_harness(run_dir, "test", "cases.txt", with_fd=False)[0].returncode == 111
    (run_dir / "bad.txt").write_text("size: 1.5; seed: 3\n")
    done, _ = run_harness(run_dir, "test", "bad.txt")
    assert done.returncode == 113 and "bad case line" in done.stderr
    done, _ = run_harness(run_dir, "test", "cases.txt", env={"POPCORN_SEED": "not-a-number"})
    assert done.returncode == 113


def test_seed_mixing_and_case_parsing_match_the_python_harness(binary):
    run_dir, compilation = binary
    assert compilation.success
    harness = load_eval_py()
    queries = [(None, 4242, 0), (None, 4242, 2), (None, -7, 1 << 40), (SECRET, 4242, 0), (SECRET, 4242, 1),
               (SECRET, 4242, (1 << 20) + 5), (SECRET, -3, 1 << 40), (1, 0, 0), (2**31 - 1, 2**40, 999)]
    lines = [f"mix {'-' if secret is None else secret} {seed} {iteration}" for secret, seed, iteration in queries]
    lines += ["case size: 127; seed: 4242", "case  n_1 : -3 ;m:+4", "case m: [96, 128]", "case size: 1.5", "case k:"]
    done, _ = run_harness(run_dir, "selftest", stdin="\n".join(lines) + "\n")
    assert done.returncode == 0, done.stderr
    output = done.stdout.splitlines()
    assert output[:len(queries)] == [str(harness.mix_seed(*query)) for query in queries]
    assert output[len(queries):] == ["seed=4242 size=127", "m=4 n_1=-3", "error", "error", "error"]


def test_the_worker_binary_alone_is_no_harness(binary):
    run_dir, compilation = binary
    assert compilation.success
    (run_dir / "cases.txt").write_text("size: 5; seed: 1\n")
    done, result = run_harness(run_dir, "test", "cases.txt", binary=BINARY_NAME)
    assert done.returncode == 2 and result == "" and "supervisor.out" in done.stderr


def test_the_worker_gets_neither_the_seed_nor_the_result_fd_nor_any_other_descriptor(binary):
    run_dir, compilation = binary
    assert compilation.success
    (run_dir / "cases.txt").write_text("size: 5; seed: 1\n")
    for seed in (None, SECRET):
        env = {} if seed is None else {"POPCORN_SEED": str(seed)}
        done, result = run_harness(run_dir, "test", "cases.txt", env=env)
        # The probe is linked into the worker (eval.out), which the supervisor started: stdio and its two pipes.
        assert "probe: env_seed=0 proc_seed=0 env_fd=0 fds=0,1,2,3,4\n" in done.stderr, done.stderr
        assert result.startswith("harness-version: kernelbot-examples-cuda ")
        if done.returncode == 110:  # no usable GPU here: the first CUDA call of the harness fails
            assert "CUDA error" in done.stderr and "check:" not in result
        else:
            assert done.returncode == 0 and result.endswith("check: pass\n"), (done.stderr, result)
