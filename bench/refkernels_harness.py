"""The reference-kernels fixture problem (tests/fixtures/reference_kernels, pmpp_v2/vectoradd_py) judged by its own
stock-shaped eval.py and by our supervisor/worker harness in its place: wall time of one ranked run (test, benchmark,
leaderboard) of the correct submission, and the leaderboard mean each harness reports, on this host's CPU.

    .venv/bin/python bench/refkernels_harness.py --rounds 3

CPU figures only say what the harness costs here; they are no statement about GPU timings.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from runner.confinement.sandbox import SandboxPolicy
from runner.stages.execute import execute
from runner.task.payload import build_payload
from runner.task.taskfile import load_problem

PROBLEM = Path(__file__).parents[1] / "tests" / "fixtures" / "reference_kernels" / "problems" / "pmpp_v2" / \
    "vectoradd_py"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    task = load_problem(PROBLEM).task
    code = (PROBLEM / "solutions" / "correct" / "add.py").read_text()
    for harness in ("problem", "kernelbot"):
        walls, means = [], []
        for round_ in range(args.rounds):
            payload = build_payload(task.model_copy(update={"harness": harness}), code, run_id=f"bench-{round_}",
                                    gpu="cpu", mode="leaderboard", secret=False, seed=None)
            started = time.perf_counter()
            result = execute(payload, sandbox=SandboxPolicy())
            walls.append(time.perf_counter() - started)
            leaderboard = result.runs.get("leaderboard")
            if leaderboard is None or not leaderboard.run.passed:
                raise SystemExit(f"{harness}: the ranked chain did not pass: {result}")
            means.append(float(leaderboard.run.result["benchmark.0.mean"]))
        runs = leaderboard.run.result["benchmark.0.runs"]
        print(f"{harness:9} ranked run wall {statistics.median(walls):6.1f} s (median of {args.rounds}), "
              f"leaderboard mean {statistics.median(means) / 1e3:8.1f} us over {runs} samples, "
              f"harness {leaderboard.harness.get('version')}")


if __name__ == "__main__":
    main()
