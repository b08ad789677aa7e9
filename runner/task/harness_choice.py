"""Which harness judges a run, decided by the runner from the files' content (issue #16, docs/authoring.md).

A Python problem in the standard reference-kernels shape (`reference.py` with `generate_input` and
`check_implementation`, `task.py`, and a `main` that is the stock `eval.py`) can be judged by KernelBot's
supervisor/worker harness instead of its own `eval.py`. That is the default (task.yml `harness: kernelbot`); a task
or competition file that says `harness: problem` keeps the problem's own. The stock harness is recognised by the
SHA-256 of its text, never by its file name: a problem whose `eval.py` differs from every known stock version keeps
running it, and the run is marked unprotected (its timer, checker and result pipe share a process with the
submission).

The decision lands in every stage's `EvalResult.harness` (`kind`, `version`, `protected`, `reason`, `main_sha256`),
written by the runner, never taken from the result channel that user code may reach; the scorer reads the version
from there, and the long report shows it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from problems import PROBLEMS_ROOT
from runner.task.stock_versions import BATCHED_TIMING, NOT_REPRODUCED, STOCK_VERSIONS
from schemas.contracts import PyConfig, RunPayload, Task

# Known stock reference-kernels Python harnesses: SHA-256 of the UTF-8 text (as task.yml loading reads it, with
# "\n" line endings) -> where it comes from. Only versions whose behaviour our harness reproduces belong here (the
# upstream versions and why each fits: runner/task/stock_versions.py); `kernelbot harness identify FILE` prints a file's
# hash and whether it is known.
STOCK_EVAL_PY: dict[str, str] = {
    # tests/fixtures/reference_kernels/problems/pmpp_v2/eval.py: a faithful rewrite of gpu-mode/reference-kernels
    # problems/pmpp_v2/eval.py (stages test/benchmark/leaderboard/profile) with a CPU stand-in for CUDA events.
    "daca68b34318212dff1e7617632479752f73fbbcddfce8d900dbcbb31ab35348": "pmpp_v2 eval.py (KernelBot test rewrite)",
    **{sha: f"reference-kernels {paths.split(', ')[0]} sha256:{sha[:12]}" for sha, (paths, _) in STOCK_VERSIONS.items()},
}

# Runner hosts may add reviewed versions without a release: comma-separated SHA-256s (`kernelbot harness identify`).
EXTRA_STOCK_VARIABLE = "KB_STOCK_EVAL_SHA256"
SHA256 = re.compile(r"[0-9a-f]{64}\Z")

OUR_PY_DIR = PROBLEMS_ROOT / "examples"
# Beside our eval.py: the same files the bundled problems' task.yml list (tests/runner/test_harness_choice.py checks).
OUR_PY_FILES = ("harness_supervisor.py", "harness_measure.py", "harness_batch.py", "harness_group.py",
                "harness_worker.py", "harness_wire.py", "harness_refkernels.py")
# Where a replaced stock version timed batches, its rule travels beside eval.py under this name (harness_batch.py).
CONTRACT_FILE = "harness_contract.json"
OUR_CU_HARNESS = PROBLEMS_ROOT / "cuda_examples" / "eval.cu"
REFERENCE_FILE = "reference.py"
REFERENCE_FUNCTIONS = ("generate_input", "check_implementation")
PY_VERSION = re.compile(r'^HARNESS_VERSION = "([^"]+)"', re.MULTILINE)
CU_VERSION = re.compile(r'kVersion = "([^"]+)"')
UNPROTECTED = ("the problem's own harness judges this run: its timer, checker and result pipe share a process "
               "with the submission")


def content_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def known_stock_versions() -> dict[str, str]:
    """The built-in stock versions plus those the runner host's operator added (read per call, not at import)."""
    extra = (item.strip().lower() for item in os.environ.get(EXTRA_STOCK_VARIABLE, "").split(","))
    return {**{sha: f"added on this host ({EXTRA_STOCK_VARIABLE})" for sha in extra if SHA256.match(sha)},
            **STOCK_EVAL_PY}


@dataclass(frozen=True)
class HarnessPlan:
    payload: RunPayload  # what the runner writes and runs (sources replaced when our harness takes over)
    info: dict[str, str] = field(default_factory=dict)  # -> EvalResult.harness of every stage

    @property
    def protected(self) -> bool:
        return self.info.get("protected") == "true"


@functools.cache
def _ours(name: str, directory: Path = OUR_PY_DIR) -> str:
    return (directory / name).read_text(encoding="utf-8")


def _version(pattern: re.Pattern, text: str) -> str:
    found = pattern.search(text)
    return found.group(1) if found else "unknown"


def _info(kind: str, version: str, protected: bool, reason: str, main_sha: str, **extra: str) -> dict[str, str]:
    return {"kind": kind, "version": version, "protected": "true" if protected else "false", "reason": reason,
            "main_sha256": main_sha, **extra}


def not_ours(main: str, main_sha: str) -> str:
    """Why a main file that is not a known stock version cannot be replaced by our harness."""
    known = NOT_REPRODUCED.get(main_sha)
    if known:
        return f"its {main} is reference-kernels {known[0].split(', ')[0]} (sha256 {main_sha[:12]}), which {known[1]}"
    return f"its {main} (sha256 {main_sha[:12]}) is not a known stock reference-kernels harness"


def has_reference_kernels_shape(sources: dict[str, str]) -> str:
    """Empty when the files have the standard shape our harness can drive, else what is missing."""
    reference = sources.get(REFERENCE_FILE)
    if reference is None:
        return f"it has no {REFERENCE_FILE}"
    missing = [name for name in REFERENCE_FUNCTIONS if not re.search(rf"^(def {name}\b|{name}\s*=)", reference,
                                                                      re.MULTILINE)]
    if missing:
        return f"its {REFERENCE_FILE} defines no {', '.join(missing)}"
    clashing = [name for name in (*OUR_PY_FILES, CONTRACT_FILE) if name in sources]
    if clashing:
        return f"its files already use the names {', '.join(clashing)}"
    return ""


def harness_field_applies(task: Task) -> bool:
    """Whether a task's `harness` can change what judges it: not for CUDA (the harness is whichever eval.cu the task
    ships) nor for a task whose main is already our own eval.py."""
    return isinstance(task.config, PyConfig) and task.files.get(task.config.main) != _ours("eval.py")


def protection_of(task: Task) -> tuple[bool, str]:
    """Whether runs of a board with this task are judged by a protected harness, and why (or why not): the same
    decision `choose_harness` takes for each run, made on the stored task so that the board can show it."""
    if not isinstance(task.config, PyConfig):
        ours = OUR_CU_HARNESS.read_text(encoding="utf-8")
        if any(text == ours for text in task.files.values()):
            return True, "KernelBot's CUDA harness"
        return False, UNPROTECTED
    main = task.files.get(task.config.main, "")
    main_sha = content_sha256(main)
    if main == _ours("eval.py"):
        return True, "KernelBot's supervisor/worker harness"
    if task.harness != "kernelbot":
        return False, f"the task asks for its own harness (harness: problem); {UNPROTECTED}"
    stock = known_stock_versions().get(main_sha)
    missing = "" if stock else not_ours(task.config.main, main_sha)
    missing = missing or has_reference_kernels_shape(task.files)
    if missing:
        return False, f"KernelBot's harness cannot take its place: {missing}; {UNPROTECTED}"
    return True, f"KernelBot's supervisor/worker harness in place of the stock {task.config.main} ({stock})"


def choose_harness(payload: RunPayload) -> HarnessPlan:
    """The harness that judges `payload`, and the payload the runner executes for it."""
    if payload.lang == "cu":
        return _choose_cuda(payload)
    main = payload.sources.get(payload.main or "", "")
    main_sha = content_sha256(main)
    ours = _ours("eval.py")
    if main == ours:
        return HarnessPlan(payload, _info("kernelbot", _version(PY_VERSION, ours), True,
                                          "KernelBot's supervisor/worker harness", main_sha))
    if payload.harness != "kernelbot":
        return HarnessPlan(payload, _info("problem", f"problem {payload.main} sha256:{main_sha[:12]}", False,
                                          UNPROTECTED, main_sha))
    stock = known_stock_versions().get(main_sha)
    missing = "" if stock else not_ours(payload.main or "", main_sha)
    missing = missing or has_reference_kernels_shape(payload.sources)
    if missing:
        return HarnessPlan(payload, _info("problem", f"problem {payload.main} sha256:{main_sha[:12]}", False,
                                          f"KernelBot's harness cannot take its place: {missing}; {UNPROTECTED}",
                                          main_sha))
    sources = {**payload.sources, payload.main: ours, **{name: _ours(name) for name in OUR_PY_FILES}}
    if main_sha in BATCHED_TIMING:
        max_inputs, bytes_target = BATCHED_TIMING[main_sha]
        sources[CONTRACT_FILE] = json.dumps({"batch": {"max_inputs": max_inputs, "bytes_target": bytes_target}})
    version = f"{_version(PY_VERSION, ours)} +reference-kernels"
    return HarnessPlan(payload.model_copy(update={"sources": sources}),
                       _info("kernelbot", version, True, f"KernelBot's supervisor/worker harness in place of the "
                             f"stock {payload.main} ({stock})", main_sha, replaced=stock))


def _choose_cuda(payload: RunPayload) -> HarnessPlan:
    files = {**payload.headers, **payload.sources}
    ours = OUR_CU_HARNESS.read_text(encoding="utf-8")
    names = [name for name, text in payload.sources.items() if text == ours]
    if names:  # built a second time alone, as the supervisor the runner starts (runner/stages/cuda_supervisor.py)
        return HarnessPlan(payload, _info("kernelbot", _version(CU_VERSION, ours), True,
                                          "KernelBot's CUDA harness: the submission runs in a worker process under "
                                          "a supervisor that owns the result pipe", content_sha256(ours),
                                          supervisor=names[0]))
    harness = next((name for name in files if name.startswith("eval.") and name != payload.submission_file), "")
    sha = content_sha256(files.get(harness, ""))
    return HarnessPlan(payload, _info("problem", f"problem {harness or 'harness'} sha256:{sha[:12]}", False,
                                      UNPROTECTED, sha))
