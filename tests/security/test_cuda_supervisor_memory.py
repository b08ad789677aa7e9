"""N2 against the shipped CUDA harness: problems/cuda_examples/eval.cu's supervisor is closed to its worker.

`supervisor.out` (eval.cu alone) holds the seed and writes the verdict; `eval.out` (the submission plus eval.cu) is
the worker it forks and execs, under the same uid in the same sandbox. A third translation unit linked into the
worker, like any user code, runs before main: it opens the supervisor's `/proc/<ppid>/maps` and `/proc/<ppid>/mem`
and reports every run of digits it finds in the supervisor's writable memory, where a dumpable supervisor keeps the
seed's text. Everything here runs without a GPU: the worker starts before the supervisor's first CUDA call.
"""

from __future__ import annotations

import re

import pytest

from problems import PROBLEMS_ROOT
from runner.confinement.sandbox import SandboxPolicy, sandbox_level
from runner.stages.cuda import find_nvcc
from runner.stages.execute import execute
from runner.task.harness_choice import OUR_CU_HARNESS
from runner.task.payload import build_payload
from runner.task.taskfile import load_problem

PROBLEM = PROBLEMS_ROOT / "cuda_examples" / "vectoradd_cu"
SECRET = 7_315_904_268_113
READER = r"""
#include <fcntl.h>
#include <unistd.h>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>
namespace {
struct ParentReader {
    ParentReader() {
        char path[64];
        std::snprintf(path, sizeof path, "/proc/%d/mem", getppid());
        int mem = open(path, O_RDONLY);
        std::snprintf(path, sizeof path, "/proc/%d/maps", getppid());
        FILE* maps = std::fopen(path, "r");
        if (mem < 0 || !maps) {
            std::fprintf(stderr, "reader: mem %s, maps %s\n", mem < 0 ? std::strerror(errno) : "open",
                         maps ? "open" : "refused");
            return;
        }
        std::set<std::string> runs;
        size_t total = 0;
        char line[512];
        while (std::fgets(line, sizeof line, maps)) {
            unsigned long low = 0, high = 0;
            char perms[5] = "";
            if (std::sscanf(line, "%lx-%lx %4s", &low, &high, perms) != 3 || perms[1] != 'w') continue;
            if (high - low > (64ul << 20)) continue;
            std::vector<char> bytes(high - low);
            ssize_t got = pread(mem, bytes.data(), bytes.size(), static_cast<off_t>(low));
            if (got <= 0) continue;
            total += static_cast<size_t>(got);
            std::string digits;
            for (ssize_t i = 0; i <= got; ++i) {
                if (i < got && std::isdigit(static_cast<unsigned char>(bytes[i]))) {
                    digits += bytes[i];
                    continue;
                }
                if (digits.size() >= 10 && digits.size() <= 20 && runs.size() < 400) runs.insert(digits);
                digits.clear();
            }
        }
        std::string listed;
        for (const auto& run : runs) listed += " " + run;
        std::fprintf(stderr, "reader: read %zu bytes of the supervisor; digits:%s\n", total, listed.c_str());
    }
} reader;
}  // namespace
"""


def supervisor_section(text: str) -> str:
    start = text.index("#ifdef KERNELBOT_SUPERVISOR")
    return text[start:text.index("#endif  // KERNELBOT_SUPERVISOR", start)]


def test_the_shipped_supervisor_makes_itself_non_dumpable_before_it_reads_the_seed_or_starts_the_worker():
    section = supervisor_section(OUR_CU_HARNESS.read_text(encoding="utf-8"))
    constructor = section.index("__attribute__((constructor(101))) void take_environment(")
    body = section[constructor:section.index("\n}\n", constructor)]
    undumpable = re.search(r"prctl\(PR_SET_DUMPABLE, 0[,)]", body)
    assert undumpable, "take_environment (which runs before main, in both images of the re-exec) calls no prctl"
    # first thing: before the seed leaves the environment or its pipe, and so before any fork of the worker
    assert undumpable.start() < body.index('getenv("POPCORN_SEED")') < body.index("read(")
    assert "fork()" not in body[:undumpable.start()] and "fork()" in section[constructor + len(body):]


@pytest.mark.slow
@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
def test_user_code_in_the_worker_cannot_read_the_supervisors_memory_in_the_sandbox():
    if sandbox_level()[0] != "full":
        pytest.skip(f"the full sandbox cannot be built here: {sandbox_level()[1]}")
    task = load_problem(PROBLEM).task
    payload = build_payload(task, (PROBLEM / "submission.cu").read_text(), run_id="cu-mem", gpu="H100", mode="test",
                            secret=True, seed=SECRET, arch="90a")
    payload = payload.model_copy(update={"sources": {**payload.sources, "reader.cu": READER}})
    result = execute(payload, sandbox=SandboxPolicy(isolate=True))
    assert result.success and result.isolation == "full", result.error
    stage = result.runs["test"]
    assert stage.compilation.success, stage.compilation.stderr[-3000:]
    assert stage.harness["protected"] == "true" and stage.run.command.startswith("./supervisor.out test ")
    stderr = stage.run.stderr
    assert "reader: " in stderr, stderr  # the worker ran the reader before main
    # A dumpable supervisor (eval.cu before N2) shows `reader: read N bytes ... digits: ... 7315904268113 ...`.
    assert "reader: mem Permission denied, maps refused" in stderr, stderr
    assert str(SECRET) not in stderr
    assert "non-dumpable" not in stderr  # the prctl itself succeeded; the supervisor went on to its worker
