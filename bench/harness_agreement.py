"""Does a correct submission score the same under our harness as under the stock one? (issue #23, "Scores must
agree"; docs/authoring.md, "Which reference-kernels harnesses the platform replaces").

One public ranked run (test -> benchmark -> leaderboard) of a correct submission per harness and round, straight
through runner.stages.execute with the local runner's sandbox (no services): `harness: problem` runs the problem's own
stock-shaped eval.py, `harness: kernelbot` replaces it with ours. The two alternate which goes first from round to
round, so a drift in machine load falls on both. Threads are pinned to one (the submission sets
torch.set_num_threads(1) before anything else, which is what our worker does; a stock pool process does not, and
OpenMP oversubscription then dominates a CPU timing). The score is what the scorer computes from the leaderboard
stage (services/scorer/scoring.verdict_of).

    .venv/bin/python bench/harness_agreement.py 20
    .venv/bin/python bench/harness_agreement.py 20 --problem tests/fixtures/reference_kernels/problems/pmpp_v2/vectoradd_py \
        --submission tests/fixtures/reference_kernels/problems/pmpp_v2/vectoradd_py/solutions/correct/add.py
    .venv/bin/python bench/harness_agreement.py 8 --large

`--large` times the same stock eval.py on RGB-to-grayscale at 1024x1024 and 2048x2048 (tens of milliseconds a call,
inputs of 12 and 48 MiB), where what a call costs around the kernel (a cache flush of the stock stand-in, a worker
woken for each call) weighs little; the default vector addition takes tens of microseconds a call, where it weighs
most.

Prints each round's two scores and their ratio, then per harness the median and spread, the ratio of the medians
(ours / stock) with a bootstrapped 95% interval, a two-sided Mann-Whitney U test, and whether the difference is
within the noise: the interval contains 1 and the test does not reject at 5%. Run it on a quiet machine: on a
loaded one the spread is the host's.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from runner.confinement.sandbox import SandboxPolicy  # noqa: E402
from runner.stages.execute import execute  # noqa: E402
from runner.task.payload import build_payload  # noqa: E402
from runner.task.taskfile import load_problem  # noqa: E402
from services.scorer.scoring import verdict_of  # noqa: E402

STOCK_SET = ROOT / "tests" / "fixtures" / "reference_kernels" / "problems" / "pmpp_v2"
VECTORADD = STOCK_SET / "vectoradd_py"
GRAYSCALE = """import torch
from task import input_t, output_t

WEIGHTS = torch.tensor([0.2989, 0.5870, 0.1140])


def custom_kernel(data: input_t) -> output_t:
    return (data * WEIGHTS.to(data.dtype)).sum(dim=-1)
"""
PIN_THREADS = "import torch as _pin_torch\n_pin_torch.set_num_threads(1)\n"
HARNESSES = ("problem", "kernelbot")  # stock, ours
BOOTSTRAP_RESAMPLES = 5000


def score_once(task, code: str, harness: str, round_number: int) -> float:
    """The scorer's score (seconds) of one public ranked run under `harness`; exits on a failed run."""
    payload = build_payload(task.model_copy(update={"harness": harness}), code, run_id=f"agree-{harness}-{round_number}",
                            gpu="cpu", mode="leaderboard", secret=False, seed=None)
    result = execute(payload, sandbox=SandboxPolicy())
    verdict = verdict_of(result, "leaderboard", task.ranking_by)
    expected = "true" if harness == "kernelbot" else "false"
    protected = {stage.harness.get("protected") for stage in result.runs.values()}
    if not verdict.passed or verdict.score is None or protected != {expected}:
        sys.exit(f"round {round_number}, harness {harness}: not a clean ranked run ({verdict.reason or protected})")
    return verdict.score


def bootstrap_ratio(stock: list[float], ours: list[float], seed: int = 23) -> tuple[float, float]:
    """95% percentile interval of median(ours) / median(stock), each side resampled with replacement."""
    rng = random.Random(seed)
    ratios = sorted(statistics.median(rng.choices(ours, k=len(ours))) /
                    statistics.median(rng.choices(stock, k=len(stock))) for _ in range(BOOTSTRAP_RESAMPLES))
    return ratios[int(0.025 * len(ratios))], ratios[int(0.975 * len(ratios)) - 1]


def mann_whitney(first: list[float], second: list[float]) -> tuple[float, float]:
    """(U of `first`, two-sided p) by the normal approximation with tie and continuity corrections (adequate from
    about 8 rounds a side; below that read the interval, not p)."""
    pooled = sorted((value, side) for side, values in enumerate((first, second)) for value in values)
    ranks: list[float] = [0.0] * len(pooled)
    tie_term, start = 0.0, 0
    while start < len(pooled):
        end = start
        while end + 1 < len(pooled) and pooled[end + 1][0] == pooled[start][0]:
            end += 1
        for index in range(start, end + 1):
            ranks[index] = (start + end) / 2 + 1
        tied = end - start + 1
        tie_term += tied ** 3 - tied
        start = end + 1
    n1, n2 = len(first), len(second)
    u = sum(rank for rank, (_, side) in zip(ranks, pooled) if side == 0) - n1 * (n1 + 1) / 2
    total = n1 + n2
    variance = n1 * n2 / 12 * ((total + 1) - tie_term / (total * (total - 1)))
    if variance <= 0:
        return u, 1.0
    z = (abs(u - n1 * n2 / 2) - 0.5) / math.sqrt(variance)
    return u, min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2)))


def spread(values: list[float]) -> str:
    ordered = sorted(values)
    quartile = len(ordered) // 4
    return (f"median {statistics.median(ordered) * 1e6:9.2f} µs   min {ordered[0] * 1e6:9.2f}   "
            f"IQR {ordered[quartile] * 1e6:.2f}..{ordered[-1 - quartile] * 1e6:.2f} µs")


def large_problem(work: Path) -> tuple[Path, Path]:
    """The stock set's grayscale problem (1024 and 2048 benchmarks) under the set's eval.py, and a correct submission
    of it: the fixture's grayscale carries an eval.py of its own, for the tests of a problem that overrides its set's."""
    shutil.copytree(STOCK_SET, work / "pmpp_v2")
    problem = work / "pmpp_v2" / "grayscale_py"
    (problem / "eval.py").unlink()
    task = problem / "task.yml"
    task.write_text(task.read_text().replace('"source": "eval.py"', '"source": "../eval.py"'))
    submission = problem / "gray.py"
    submission.write_text(GRAYSCALE)
    return problem, submission


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rounds", type=int, help="rounds; each runs both harnesses once")
    parser.add_argument("--problem", type=Path, default=VECTORADD, help="a problem directory with a stock eval.py")
    parser.add_argument("--submission", type=Path, default=None,
                        help="a correct submission (default: the problem's solutions/correct/*.py, first)")
    parser.add_argument("--large", action="store_true",
                        help="the stock set's grayscale at 1024 and 2048 instead (see above); ignores --problem")
    args = parser.parse_args()
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[variable] = "1"  # for whatever the runner passes on; the submission pins torch itself
    if args.large:
        with tempfile.TemporaryDirectory(prefix="kb-agreement-") as work:
            args.problem, args.submission = large_problem(Path(work))
            return compare(args)
    return compare(args)


def compare(args: argparse.Namespace) -> int:
    task = load_problem(args.problem).task
    submission = args.submission or sorted((args.problem / "solutions" / "correct").glob("*.py"))[0]
    code = PIN_THREADS + submission.read_text()
    print(f"problem {args.problem}  submission {submission}  ranking_by {task.ranking_by}  rounds {args.rounds}")
    scores: dict[str, list[float]] = {harness: [] for harness in HARNESSES}
    print(f"{'round':>5} {'first':>9} {'stock µs':>10} {'ours µs':>10} {'ours/stock':>10} {'wall s':>7}", flush=True)
    for round_number in range(args.rounds):
        order = HARNESSES if round_number % 2 == 0 else HARNESSES[::-1]
        began = time.monotonic()
        for harness in order:
            scores[harness].append(score_once(task, code, harness, round_number))
        last_stock, last_ours = scores["problem"][-1], scores["kernelbot"][-1]
        print(f"{round_number:>5} {'stock' if order[0] == 'problem' else 'ours':>9} {last_stock * 1e6:>10.2f} "
              f"{last_ours * 1e6:>10.2f} {last_ours / last_stock:>10.3f} {time.monotonic() - began:>7.1f}", flush=True)
    stock, ours = scores["problem"], scores["kernelbot"]
    print(f"stock: {spread(stock)}")
    print(f"ours:  {spread(ours)}")
    low, high = bootstrap_ratio(stock, ours)
    u, p = mann_whitney(ours, stock)
    ratio = statistics.median(ours) / statistics.median(stock)
    within = low <= 1.0 <= high and p >= 0.05
    print(f"median ours / median stock = {ratio:.3f}, bootstrapped 95% interval {low:.3f}..{high:.3f}")
    print(f"Mann-Whitney U (ours vs stock) = {u:.1f}, two-sided p = {p:.3f} (normal approximation)")
    print(f"within the noise: {'yes' if within else 'no'} (interval contains 1 and p >= 0.05)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
