"""The level of isolation the runner reports with each result (FullResult.isolation), the field the scorer ranks by:
the run's own level, so a policy that turns isolation off is reported as such even where the host could isolate."""

from __future__ import annotations

from runner.confinement.sandbox import SandboxPolicy, sandbox_level
from runner.stages.execute import execute
from tests.runner.test_runner_execute import PASSING_HARNESS


def test_a_run_with_isolation_turned_off_reports_limits_only(tiny_payload):
    result = execute(tiny_payload(PASSING_HARNESS, tests=[{"size": 1, "seed": 1}]),
                     sandbox=SandboxPolicy(isolate=False))
    assert result.success and result.isolation == "limits-only"


def test_a_run_under_the_default_policy_reports_what_this_host_gives(tiny_payload):
    result = execute(tiny_payload(PASSING_HARNESS, tests=[{"size": 1, "seed": 1}]), sandbox=SandboxPolicy())
    assert result.success and result.isolation == sandbox_level()[0]


def test_an_unconfined_run_is_not_reported_as_isolated(tiny_payload):
    result = execute(tiny_payload(PASSING_HARNESS, tests=[{"size": 1, "seed": 1}]))
    assert result.success and result.isolation == "limits-only"
