"""`kernelbot conformance`: the checks a vendor or operator runs on a runner host (issue #16 item 4).

It runs the bundled CUDA problem (correct and wrong), the exploit suite against the CUDA paths of our Python harness
and of eval.cu (fake events, side streams, the result fd from inside C++, a kernel that keeps running after it
returns), a timing-noise measurement of a ~10 us kernel against a CUDA-graph ground truth, and a two-rank NCCL case
when two GPUs exist. Each check prints one line (PASS, FAIL or SKIP with the reason); a summary ends the output. On a
host without a GPU it runs what it can and reports the rest as skipped. tests/gpu/ runs the same checks under
pytest, marked `gpu`.
"""

from .checks import CHECKS, HostCapabilities, run_checks
from .report import CheckResult, summary_line

__all__ = ["CHECKS", "CheckResult", "HostCapabilities", "run_checks", "summary_line"]
