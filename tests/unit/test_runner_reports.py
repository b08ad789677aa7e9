"""Who may report which run (services/dispatcher/runner_reports.py). Pure."""

from __future__ import annotations

import pytest

from services.dispatcher.runner_reports import check_reporter, reporter_of
from services.kit.deadletter import Inadmissible, is_poison

RUNNERS = {"H100": ("nebius", "acme"), "MI300": ("amd",), "cpu": ()}


def test_the_subject_names_the_reporter():
    assert reporter_of("runner.nebius.run.completed") == "nebius"
    for subject in ("evt.run.completed", "runner..run.completed", "runner"):
        with pytest.raises(Inadmissible):
            reporter_of(subject)


def test_a_runner_listed_for_the_gpu_of_the_run_may_report_it():
    check_reporter("nebius", "7.H100.public", "H100", RUNNERS)
    check_reporter("acme", "7.H100.secret", "H100", RUNNERS)


@pytest.mark.parametrize(("reporter", "gpu", "reason"), [
    ("amd", "H100", "may not report run"),        # another vendor's GPU
    ("nebius", "cpu", "may not report run"),      # a GPU no runner reports for
    ("nebius", "B200", "may not report run"),     # a GPU missing from the catalogue
    ("nebius", None, "never dispatched"),         # a run this platform never planned
])
def test_anything_else_is_inadmissible_and_dead_lettered(reporter, gpu, reason):
    with pytest.raises(Inadmissible, match=reason) as refused:
        check_reporter(reporter, "7.H100.public", gpu, RUNNERS)
    assert is_poison(refused.value)
