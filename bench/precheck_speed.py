"""How long the source pre-check takes at admission (it runs in the dispatcher's admitting transaction).

    .venv/bin/python bench/precheck_speed.py

Prints the median of several runs for a small real kernel, a ~1 MB Python file (the size limit) and a ~1 MB CUDA
file. Figures depend on the machine and its load.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from services.core.admission.precheck import precheck

ROOT = Path(__file__).resolve().parents[1]
SMALL = (ROOT / "tests" / "exploits" / "submissions" / "cuda_event_patch.py").read_text()
FUNCTION = ("def kernel_{i}(data):\n    a, b = data\n    out = a.clone()\n    for _ in range(3):\n"
            "        out = out * 0.5 + b\n    return out  # a comment about torch.cuda.Event\n\n\n")
CUDA = ("__global__ void kernel_{i}(const float* a, float* b, int n) {{\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;  // one per element\n"
        "    if (i < n) b[i] = a[i] * 2.0f;\n}}\n\n")


def median_ms(code: str, name: str, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        precheck(code, name, "leaderboard")
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    big_py = "import torch\n\n" + "".join(FUNCTION.format(i=i) for i in range(1_000_000 // len(FUNCTION)))
    big_cu = "".join(CUDA.format(i=i) for i in range(1_000_000 // len(CUDA)))
    for label, code, name in (("small exploit (.py)", SMALL, "a.py"), ("~1 MB Python", big_py, "a.py"),
                              ("~1 MB CUDA", big_cu, "a.cu")):
        print(f"{label:<22} {len(code):>9} bytes  {median_ms(code, name):8.1f} ms (median of 5)")


if __name__ == "__main__":
    main()
