"""The chain (runner/launching/chain.py) against one harness process per stage, interleaved on the same warm runner so
both see the same machine load: one public ranked run (test -> benchmark -> leaderboard) of vectoradd_py per sample,
straight through runner.stages.execute with the local runner's sandbox (no services).

    .venv/bin/python bench/chain_ab.py 5

Per mode: the run's wall time, the harness's own loops (first to last result line, summed over stages), what lies
outside them, the time to the first result line, and the per-stage overhead (stage wall minus its loop).
"""

from __future__ import annotations

import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from problems import PROBLEMS_ROOT  # noqa: E402
from runner.confinement.sandbox import SandboxPolicy  # noqa: E402
from runner.stages.execute import execute  # noqa: E402
from runner.task.payload import build_payload  # noqa: E402
from runner.task.taskfile import load_problem  # noqa: E402
from tests.support.warm import warm_runner  # noqa: E402


def stamp(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def sample(launcher, chain: bool) -> tuple[float, float, float, list[float], float]:
    task = load_problem(PROBLEMS_ROOT / "examples" / "vectoradd_py").task
    code = (PROBLEMS_ROOT / "examples" / "vectoradd_py" / "submission.py").read_text()
    payload = build_payload(task, code, run_id="ab", gpu="cpu", mode="leaderboard", secret=False, seed=None)
    began = time.time()
    result = execute(payload, sandbox=SandboxPolicy(), warm=launcher, chain=chain)
    total = time.time() - began
    stages = [stage.timing for stage in result.runs.values()]
    loops = [stamp(t["harness_finished"]) - stamp(t["harness_started"]) for t in stages]
    overheads = [stamp(t["process_ended"]) - stamp(t["process_started"]) - loop for t, loop in zip(stages, loops)]
    return total, sum(loops), total - sum(loops), overheads, stamp(stages[0]["harness_started"]) - began


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    rows: dict[bool, list] = {True: [], False: []}
    with open("/proc/loadavg") as handle:
        print("load average", " ".join(handle.read().split()[:3]))
    with warm_runner() as (launcher, _):
        for index in range(count + 1):  # the first pair warms up, uncounted
            for chain in (True, False):
                measured = sample(launcher, chain)
                if index:
                    rows[chain].append(measured)
    for chain, values in rows.items():
        medians = [statistics.median(value[k] for value in values) for k in (0, 1, 2, 4)]
        overheads = [o for value in values for o in value[3]]
        print(f"chain={chain}: run wall p50 {medians[0]:.3f} s, harness loops {medians[1]:.3f} s, outside "
              f"{medians[2]:.3f} s, to the first result line {medians[3]:.3f} s, per-stage overhead p50 "
              f"{statistics.median(overheads) * 1000:.1f} ms max {max(overheads) * 1000:.1f} ms (n={len(values)})")
    with open("/proc/loadavg") as handle:
        print("load average", " ".join(handle.read().split()[:3]))


if __name__ == "__main__":
    main()
