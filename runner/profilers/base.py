"""What every external capture tool provides to the profile stage (runner/stages/profile_stage.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from schemas.contracts import ProfileOptions


class RunTool(Protocol):
    """Commands and file reads confined like the harness: the capture's files live where the run's processes
    write (its TMPDIR), which in the full sandbox only they can see (runner/stages/profile_stage.py)."""

    def run(self, argv: list[str]) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) of `argv`."""
        ...

    def files(self, directory: str) -> list[str]:
        """The files under `directory`, relative to it, sorted; [] when it does not exist."""
        ...

    def read(self, path: str) -> bytes:
        ...
# The environment the harness sees under a capture tool: it warms the kernel up outside the captured range, then
# makes one steady-state call inside the `custom_kernel` range (problems/examples/harness_worker.py). POPCORN_NCU is
# what upstream's reference-kernels harnesses read for the same purpose.
HARNESS_ENV = {"POPCORN_PROFILE_TOOL": "1", "POPCORN_NCU": "1"}


@dataclass
class Capture:
    """What one case's capture produced: files for the bundle, how many kernels it holds, and why it failed."""

    files: dict[str, bytes] = field(default_factory=dict)  # details text and CSV first, then the raw output
    kernels: list[str] = field(default_factory=list)  # captured kernel names, in launch order
    error: str = ""  # a failed or empty capture
    truncated: bool = False  # the launch count ended the capture: later launches were not captured
    notes: list[str] = field(default_factory=list)


class CaptureTool(Protocol):
    @property
    def name(self) -> str:
        """The ProfileResult's `profiler`."""
        ...

    @property
    def version(self) -> str:
        """The version the runner images pin (docs/vendors.md)."""
        ...

    @property
    def essential(self) -> tuple[str, ...]:
        """Raw output a client needs besides the details (Nsight Compute's report); never dropped for size."""
        ...

    def capture_argv(self, options: ProfileOptions, out_dir: str) -> list[str]:
        """The prefix that runs the harness under the tool, writing into `out_dir`."""
        ...

    def collect(self, options: ProfileOptions, out_dir: str, tool: RunTool, tool_stderr: str) -> Capture:
        """Export and read what the capture wrote; `tool_stderr` is the captured run's standard error."""
        ...

    def failure(self, stderr: str) -> str | None:
        """The tool's own error, when the run under it failed because of the tool."""
        ...

    def settings(self, options: ProfileOptions) -> dict[str, object]:
        """The capture options as the tool applied them, for the manifest."""
        ...
