"""Results that runners on GPU hosts report themselves (docs/authoring.md: the runner publishes its result when it can
reach NATS). A runner's NATS user may publish only below `runner.<its name>.`, so the subject names the reporter;
this module decides whether that reporter may report that run. Pure: the dispatcher's handler feeds it the run's
GPU as the dispatcher planned it, and then builds the event from its own record, taking only the result.
"""

from __future__ import annotations

from collections.abc import Mapping

from schemas.streams import RUNNER_REPORT_PREFIX
from services.kit.deadletter import Inadmissible


def reporter_of(subject: str) -> str:
    """`runner.acme.run.completed` was published by runner `acme`."""
    prefix, _, rest = subject.partition(".")
    name = rest.split(".", 1)[0]
    if prefix != RUNNER_REPORT_PREFIX or not name:
        raise Inadmissible(f"{subject!r} is not a runner report subject")
    return name


def check_reporter(reporter: str, run_id: str, planned_gpu: str | None,
                   runners_by_gpu: Mapping[str, tuple[str, ...]]) -> None:
    """Raises Inadmissible unless the run was planned and the reporter serves its GPU."""
    if planned_gpu is None:
        raise Inadmissible(f"runner {reporter!r} reported run {run_id!r}, which was never dispatched")
    if reporter not in runners_by_gpu.get(planned_gpu, ()):
        raise Inadmissible(f"runner {reporter!r} may not report run {run_id!r}: it is on GPU {planned_gpu!r}, "
                           f"whose catalogue entry does not list that runner")
