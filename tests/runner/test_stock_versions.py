"""The reference-kernels eval.py versions our harness takes over (runner/task/stock_versions.py, docs/authoring.md).

The tables are checked against the real upstream files where a clone of gpu-mode/reference-kernels is at hand
(REFERENCE_KERNELS_GIT, a git directory; skipped without one, never committed here): every version of every
`problems/**/eval.py` in its history is in exactly one table, nothing else is, and the 15 files at the head reviewed
in issue #23 have the hashes listed there. The behaviours that sorted a version into "ours" are tested on fixtures
shaped like those problems: legacy message checkers, booleans and tuples in cases, a compile_kernel() step (here);
multi-rank cases (tests/runner/test_runner_harness_modes.py); the pmpp_v2 contract itself
(tests/exploits/test_refkernels_harness.py).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import subprocess
from pathlib import Path

import pytest

from problems import PROBLEMS_ROOT
from runner.confinement.sandbox import SandboxPolicy
from runner.stages.execute import execute
from runner.task.harness_choice import STOCK_EVAL_PY, choose_harness, known_stock_versions, protection_of
from runner.task.payload import build_payload
from runner.task.stock_versions import NOT_REPRODUCED, STOCK_VERSIONS
from runner.task.taskfile import load_problem
from services.scorer.scoring import verdict_of

MIRROR = Path(os.environ.get("REFERENCE_KERNELS_GIT", "/work/.mirror/gpu-mode+reference-kernels/repo"))
VECTORADD = Path(__file__).parents[1] / "fixtures" / "reference_kernels" / "problems" / "pmpp_v2" / "vectoradd_py"
# issue #23: the eval.py files at reference-kernels f83cb92, and whether our harness takes each one over
HEAD = {
    "problems/pmpp_v2/eval.py": ("7bbde85d8c4849c9ec8ca2c8a0adf4f59d2fc5bf1ea1f9de992e38f4d81b7c80", True),
    "problems/pmpp/eval.py": ("c33495f16f64c20b7c3412efa66b5fe6760ec23021f66ff53432d95fc17e5e10", True),
    "problems/nvidia/eval.py": ("fef54da05e87a970d52eeac2665b593eb9b611895b03f008f0a15a8c2f27a9aa", True),
    "problems/nvidia/nvfp4_group_gemm/eval.py":
        ("b1e984d50dbd43745a3c4566fb63c75bc04ee5ae3401603176a06481e64a1c01", True),
    "problems/amd/eval.py": ("7a762dc03ff2ea8e9b9767f48cc5259e45bd2dcd2fbc7b74f302376442ccd258", True),
    "problems/amd/mla-decode/eval.py": ("3f1aab085cd60125905bc3b466f288c48c32cf80e3af408a26dcd58e340412f2", False),
    "problems/amd_202602/eval.py": ("601424938e19e26622d84c7811daae47740376c152a21efa735e26b4866eaf55", True),
    "problems/amd_202602/moe-mxfp4/eval.py":
        ("365f5182a7defad5f0370e94fad1d3d0c7171c8ebea8e6a05abefee58a1299ef", False),
    "problems/amd_distributed/eval.py": ("666ddf88587c4018daa9e7696a5012b85646f2a284053bd0d308af6ec82b1652", True),
    "problems/bioml/trimul/eval.py": ("94f5b0a0ff72e797c0c83c30478697a897dc2ac369f8cc8e07dbcd0272803f51", True),
    "problems/helion/eval.py": ("1cfede319ce057301146f3f8e8bea1aeaab31701bf19d88004aeb339c8c6981b", False),
    "problems/linalg/cholesky_py/eval.py": ("c4c6ec6dd8949768be9b876962f3b4b9be9ad163fc460fd786942372b5ba654a", True),
    "problems/linalg/eigh_py/eval.py": ("ad577ad69c360c43eb68997ea17e2fe14b83848f7a446aa735e379060d4cba42", True),
    "problems/linalg/qr_py/eval.py": ("3ee309171dbc484ce0fda4ac98d28f8739e6ff491f2ceff99db1dc8ba0fc50ac", True),
    "problems/linalg/qr_v2/eval.py": ("3ee309171dbc484ce0fda4ac98d28f8739e6ff491f2ceff99db1dc8ba0fc50ac", True),
    "problems/princeton/cross_entropy_py/eval.py":
        ("6d8a6235cf93f3a6bace03aaef3cf9382998a3f413f58e0a8538e4ac9a336978", False),
}


# eval.py, and the harness files task.yml files ship under that name (nvidia/eval_better_bench*.py, ...); not tests
HARNESS_FILE = re.compile(r"problems/(.+/)?eval(_[a-z_]+)?\.py")


def git(*args: str) -> bytes:
    return subprocess.run(["git", "--git-dir", str(MIRROR), *args], check=True, capture_output=True).stdout


needs_mirror = pytest.mark.skipif(not (MIRROR / "HEAD").is_file(), reason=f"no reference-kernels clone at {MIRROR}")


def test_the_tables_are_the_per_version_table_of_docs_authoring():
    text = (Path(__file__).parents[2] / "docs" / "authoring.md").read_text()
    for sha in {**STOCK_VERSIONS, **NOT_REPRODUCED}:
        assert f"`{sha}` | {'ours' if sha in STOCK_VERSIONS else 'not ours'} |" in text, sha


def test_no_version_is_in_both_tables_and_every_entry_is_a_full_hash():
    assert not set(STOCK_VERSIONS) & set(NOT_REPRODUCED)
    for sha, (paths, why) in {**STOCK_VERSIONS, **NOT_REPRODUCED}.items():
        assert len(sha) == 64 and int(sha, 16) >= 0 and paths.startswith("problems/") and why
    assert set(STOCK_VERSIONS) <= set(STOCK_EVAL_PY) and not set(NOT_REPRODUCED) & set(known_stock_versions())


@needs_mirror
def test_every_upstream_version_in_history_is_sorted_and_nothing_else_is():
    seen: dict[str, set[str]] = {}
    for commit in git("log", "--all", "--format=%H", "--", "problems/**/*eval*.py").decode().split():
        changed = git("diff-tree", "--no-commit-id", "--name-only", "-r", "--root", commit).decode().split()
        for path in changed:
            if HARNESS_FILE.fullmatch(path):
                try:
                    blob = git("show", f"{commit}:{path}")
                except subprocess.CalledProcessError:  # deleted in this commit
                    continue
                seen.setdefault(hashlib.sha256(blob).hexdigest(), set()).add(path)
    assert set(seen) == set(STOCK_VERSIONS) | set(NOT_REPRODUCED)
    for sha, paths in seen.items():
        assert set(({**STOCK_VERSIONS, **NOT_REPRODUCED}[sha][0]).split(", ")) == paths, sha


@needs_mirror
def test_the_head_files_of_issue_23_have_the_listed_hashes_and_verdicts():
    for path, (sha, ours) in HEAD.items():
        assert hashlib.sha256(git("show", f"HEAD:{path}")).hexdigest() == sha, path
        assert (sha in STOCK_VERSIONS) == ours and (sha in NOT_REPRODUCED) != ours, path


@needs_mirror
def test_a_board_with_a_listed_upstream_version_is_protected_and_one_without_says_why():
    """The board-level decision (`protection_of`) on the real upstream bytes, in the vectoradd fixture's shape."""
    task = load_problem(VECTORADD).task
    for path, (sha, ours) in HEAD.items():
        text = git("show", f"HEAD:{path}").decode()
        protected, reason = protection_of(task.model_copy(update={"files": {**task.files, "eval.py": text}}))
        assert protected == ours, (path, reason)
        if not ours:
            assert NOT_REPRODUCED[sha][1] in reason and sha[:12] in reason


def harness_eval_module():
    spec = importlib.util.spec_from_file_location("examples_eval_versions", PROBLEMS_ROOT / "examples" / "eval.py")
    module = importlib.util.module_from_spec(spec)
    import sys

    sys.path.insert(0, str(PROBLEMS_ROOT / "examples"))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(PROBLEMS_ROOT / "examples"))
    return module


def test_case_lines_read_booleans_and_tuples_as_the_2026_versions_do():
    """amd_202602 and helion read true/false as booleans; nvfp4_group_gemm reads (a, b) as a tuple."""
    parse = harness_eval_module().parse_case_line
    assert parse("m: 128; gated: true; bias: false; name: normal") == {"m": 128, "gated": True, "bias": False,
                                                                        "name": "normal"}
    assert parse("g_m: (128, 256); k: [64, 64]; seed: 7") == {"g_m": (128, 256), "k": [64, 64], "seed": 7}
    with pytest.raises(ValueError):
        parse("m: (128, x)")


LEGACY_REFERENCE = '''
import torch
from utils import make_match_reference
from reference_tuple import generate_input as _generate
from reference_tuple import ref_kernel

generate_input = _generate
_check = make_match_reference(ref_kernel, rtol=1e-3, atol=1e-3)


def check_implementation(data, output):
    """The 2025 amd/pmpp contract: a message, empty when the output is right."""
    good, message = _check(data, output)
    return "" if good else (message or "wrong")
'''
COMPILED = '''
_compiled = []


def compile_kernel():
    _compiled.append(True)


def custom_kernel(data):
    if not _compiled:
        raise RuntimeError("compile_kernel() was not called before the first call")
    a, b, c = data
    c[...] = a + b
    return c
'''


def run_under_ours(files: dict[str, str], submission: str):
    task = load_problem(VECTORADD).task
    task = task.model_copy(update={"files": {**task.files, **files}, "benchmarks": task.benchmarks[:1]})
    payload = build_payload(task, submission, run_id="versions", gpu="cpu", mode="leaderboard", secret=False,
                            seed=None)
    assert choose_harness(payload).protected
    return execute(payload, sandbox=SandboxPolicy())


@pytest.mark.slow
def test_a_legacy_message_checker_and_a_compile_kernel_step_run_under_ours():
    """The 2025 amd/pmpp versions' checkers return a message (empty = pass); the nvfp4 versions call the
    submission's compile_kernel() once, untimed, before the stages. Both judged by ours, wrong and right."""
    task = load_problem(VECTORADD).task
    legacy = {"reference.py": LEGACY_REFERENCE, "reference_tuple.py": task.files["reference.py"]}
    correct = (VECTORADD / "solutions" / "correct" / "add.py").read_text()
    wrong = (VECTORADD / "solutions" / "wrong" / "sub.py").read_text()
    right, refused, compiled = (run_under_ours(legacy, correct), run_under_ours(legacy, wrong),
                                run_under_ours({}, COMPILED))
    assert verdict_of(right, "leaderboard", "last").passed
    assert not verdict_of(refused, "leaderboard", "last").passed
    assert "Number of mismatched elements" in refused.runs["test"].run.result["test.0.error"]
    assert verdict_of(compiled, "leaderboard", "last").passed, compiled.runs["test"].run.result
