"""The text of a `profile` stage's report (docs/authoring.md).

Our Python harness profiles one call of the kernel with torch.profiler and writes the table as
`benchmark.0.report`, base64 with `+` and `*` as the last two characters. Under Nsight Compute or rocprofv3 the
runner replaces that report with the head of the tool's details (runner/stages/profile_stage.py).
"""

from __future__ import annotations

import base64
import binascii

TORCH_PROFILER = "torch.profiler"


def decode_report(text: str) -> str:
    """A `benchmark.i.report` value as text; both `*` (harness) and `/` (standard) are accepted as the 64th
    character."""
    try:
        return base64.b64decode(text.replace("*", "/"), validate=True).decode("utf-8", errors="replace")
    except (binascii.Error, ValueError):
        return ""


def encode_report(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii").replace("/", "*")
