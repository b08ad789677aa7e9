"""The ProfileResult of a `profile` stage (docs/authoring.md).

Our Python harness profiles one call of the kernel with torch.profiler (CPU activities; CUDA activities too on a
GPU) and writes the table as `benchmark.0.report`, base64 with `+` and `*` as the last two characters. The runner
keeps that report readable in the result map and zips it, once decoded, into `ProfileResult.trace`.
"""

from __future__ import annotations

import base64
import binascii
import io
import zipfile

from schemas.contracts import ProfileResult

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


def profile_result(result: dict[str, str]) -> ProfileResult | None:
    """The stage's reports, zipped as `profile-<i>.txt`; None when the harness wrote none."""
    reports = {key: decode_report(value) for key, value in result.items() if key.endswith(".report")}
    if not reports:
        return None
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for key, text in sorted(reports.items()):
            archive.writestr(f"{key.removesuffix('.report')}.txt", text)
    profiler = result.get("profiler", TORCH_PROFILER)
    return ProfileResult(profiler=profiler, trace=base64.b64encode(buffer.getvalue()).decode("ascii"))
