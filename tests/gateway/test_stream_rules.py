"""Pure parts of streaming: frame cadence and termination, terminal events, redaction, reports; and the ledger's
projection of a deletion. No platform needed."""

from __future__ import annotations

import json

from schemas.contracts import FullResult, SystemInfo
from schemas.events import RunCompleted, SubmissionDeleted
from services.core.presentation import reports, results
from services.gateway.submitting import sse
from services.ledger import projections
from services.ledger.archive_sql import ARCHIVE_STATEMENTS

RUNNING = sse.JobState(deleted=False, done=False, rejected=False, job_status="running", job_error=None)


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


async def collect(states, outcomes=(), **kwargs) -> tuple[list[tuple[str, dict]], FakeTime]:
    time = FakeTime()
    states = iter(states)

    async def read_state():
        return next(states, RUNNING)

    async def read_outcomes():
        return list(outcomes)

    frames = []
    async for raw in sse.follow(42, "H100", read_state, read_outcomes, clock=time.clock, sleep=time.sleep, **kwargs):
        text = raw.decode("ascii")
        event, data = text.removesuffix("\n\n").split("\n")
        frames.append((event.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return frames, time


async def test_status_every_15_seconds_then_504_when_the_stream_outlives_its_limit():
    frames, time = await collect([], limit_s=50.0)

    assert [name for name, _ in frames] == ["status"] * 4 + ["error"]
    assert [data["elapsed_time"] for _, data in frames[:4]] == [0.0, 15.0, 30.0, 45.0]
    assert frames[1][1]["message"] == "Submission 42 running on H100 (15s elapsed)"
    assert frames[-1][1] == {"status": "error", "status_code": 504, "submission_id": 42,
                             "detail": "Submission 42 is still running; check it with: popcorn-cli submissions "
                                       "show 42"}
    assert 50.0 <= time.now < 51.0


async def test_terminal_events_by_job_state():
    def final(**changes):
        state = sse.JobState(**{**RUNNING.__dict__, "done": True, **changes})
        return json.loads(sse.final_event(42, state, []).decode().split("data: ")[1])

    assert final(deleted=True, done=False)["status_code"] == 409
    assert final(job_status="timed_out", job_error="hard timeout reached")["detail"] == (
        "Submission 42 timed out: hard timeout reached")
    assert final(job_status="hacked", job_error="Submission rejected by KernelGuard pre-check (x).")["status_code"] \
        == 400
    assert final(job_status="failed", rejected=True, job_error="The deadline has passed")["status_code"] == 400
    assert final(job_status="failed", job_error="launch_error: no capacity") == {
        "status": "error", "status_code": 502, "submission_id": 42,
        "detail": "Execution backend error: launch_error: no capacity"}


async def test_reads_that_keep_failing_end_the_stream_with_one_error_and_a_blip_does_not():
    time = FakeTime()
    calls = 0

    async def flaky():
        nonlocal calls
        calls += 1
        if calls in (2, 3):
            raise RuntimeError("database restarting")
        return RUNNING if calls < 5 else sse.JobState(**{**RUNNING.__dict__, "deleted": True})

    async def broken():
        raise RuntimeError("database gone")

    survived = [raw async for raw in sse.follow(7, "H100", flaky, broken, clock=time.clock, sleep=time.sleep)]
    failed = [raw async for raw in sse.follow(7, "H100", broken, broken, clock=time.clock, sleep=time.sleep)]

    assert survived[-1].startswith(b"event: error\n") and b'"status_code": 409' in survived[-1]
    names = [frame.split(b"\n")[0] for frame in failed]
    assert names[-1] == b"event: error" and set(names[:-1]) == {b"event: status"}
    payload = json.loads(failed[-1].split(b"data: ")[1])
    assert payload["status_code"] == 500 and payload["detail"].startswith("An unexpected error occurred (ref ")


def test_frames_are_ascii_single_line_json():
    raw = sse.error_event(1, 400, "naïve\nline ✅")
    assert raw == b'event: error\ndata: {"status": "error", "detail": "na\\u00efve\\nline \\u2705", ' \
                  b'"status_code": 400, "submission_id": 1}\n\n'


def _request(run_id, secret, status="completed", **extra):
    return {"run_id": run_id, "gpu": "H100", "mode": "private" if secret else "leaderboard", "secret": secret,
            "status": status, "backend": "modal", "error": None, "success": None, "result_error": "",
            "system": None, **extra}


def test_secret_runs_are_redacted_and_listed_after_the_public_one():
    evaluation = {"start": "s", "end": "e", "samples": {"x": [1]},
                  "compilation": {"success": True, "command": "nvcc", "stdout": "o", "stderr": "e", "exit_code": 0},
                  "run": {"success": True, "passed": True, "command": "python", "stdout": "o", "stderr": "e",
                          "exit_code": 0, "duration": 1.5, "result": {"check": "pass"}}, "profile": None}
    def stage(run_id: str) -> dict:
        return {"run_id": run_id, "stage": "test", "result": evaluation, "system": {"gpu": "H100"}}

    public, secret = results.outcomes([_request("1.secret", True), _request("1.public", False)],
                                      [stage("1.public"), stage("1.secret")], ["H100"])

    assert (public.secret, secret.secret) == (False, True)
    assert public.result["runs"]["test"]["run"]["stdout"] == "o"
    assert "samples" not in public.result["runs"]["test"]
    hidden = secret.result["runs"]["test"]
    assert hidden["run"] == {"success": True, "passed": True, "command": "", "stdout": "", "stderr": "",
                             "exit_code": 0, "duration": 1.5, "result": {}}
    assert (hidden["compilation"]["stdout"], hidden["compilation"]["success"]) == ("", True)


def test_a_run_that_never_completed_is_an_unsuccessful_result_with_its_error():
    [lost] = results.outcomes([_request("1.public", False, status="failed", error="lost: runner vanished")], [],
                              ["H100"])
    assert lost.completed is False
    assert lost.result == {"success": False, "error": "lost: runner vanished", "system": SystemInfo().model_dump(),
                           "runs": {}}
    assert reports.report("H100", "modal", "leaderboard", secret=False, result=lost.result) == (
        "**H100 on Modal ❌ failure**\n> lost: runner vanished")


def test_short_lines_stop_at_the_first_failure():
    def stage(success=True, passed=True, exit_code=0):
        return {"run": {"success": success, "passed": passed, "exit_code": exit_code}}

    compiled = {"compilation": {"success": True}, **stage()}
    assert reports.short_lines({"test": compiled, "benchmark": stage(passed=False)}, ranked=True) == [
        "✅ Compilation successful", "✅ Testing successful", "❌ Benchmarking failed"]
    assert reports.short_lines({"test": {"compilation": {"success": False}, "run": None}}, ranked=False) == [
        "❌ Compilation failed"]
    assert reports.short_lines({"test": stage(success=False, exit_code=114)}, ranked=False) == [
        "❌ Running tests failed (timeout)"]
    assert reports.short_lines({"benchmark": stage(), "leaderboard": stage(exit_code=0)}, ranked=True) == [
        "❌ Tests missing"]
    assert reports.short_lines({"profile.1": stage(success=False, exit_code=-11), "profile.0": stage()},
                               ranked=False) == ["❌ Running profile failed (internal error -11)"]
    # one verdict for every profile case, not one line per case
    assert reports.short_lines({f"profile.{i}": stage() for i in range(3)}, ranked=False) == [
        "✅ Profiling successful"]
    assert reports.title("B200", "github", secret=True, success=True) == "**B200 on GitHub (secret) ✅ success**"


def test_the_ledger_hides_a_deleted_submission_and_keeps_each_runs_own_verdict():
    deleted = SubmissionDeleted(submission_id=5, user_id="u")
    completed = RunCompleted(run_id="5.H100.test", submission_id=5, leaderboard="b", gpu="H100", mode="test",
                             result=FullResult(success=False, error="runner error: boom"))

    [plan] = projections.plan_batch([(1, deleted), (2, completed)])

    assert plan.rows["submission_delete"] == [(5,)]
    # the deletion wakes the deleting gateway, the run's own verdict is recorded: both read from the archived events
    assert plan.types == {"SubmissionDeleted", "RunCompleted"}
    assert "SubmissionDeleted" in ARCHIVE_STATEMENTS["notify_submission"][0]
    assert "RunCompleted" in ARCHIVE_STATEMENTS["run_request_outcome"][0]
    order = projections.STATEMENT_ORDER
    # within one batch a deletion lands after the insert it hides, an outcome after the status it completes
    assert order.index("submission_insert") < order.index("submission_delete")
    assert order.index("run_request_status") < order.index("run_request_outcome")
