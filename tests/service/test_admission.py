"""Admission through the ledger and the dispatcher on TestNatsBroker: what a received submission turns into."""

from __future__ import annotations

from problems import PROBLEMS_ROOT
from schemas.events import RunRequested, SubmissionAccepted, SubmissionReceived, SubmissionRejected
from services.cli.bundled import leaderboards_from_competition
from services.dispatcher.handlers import kit as dispatcher_kit
from services.dispatcher.handlers import router as dispatcher_router
from services.ledger.handlers import kit as ledger_kit
from services.ledger.handlers import router as ledger_router
from tests.support.service_tier import running_services

VECTORADD = PROBLEMS_ROOT / "examples" / "vectoradd_py"
CORRECT = (VECTORADD / "submission.py").read_text()


def received(submission_id: int, *, leaderboard: str = "vectoradd_py", mode: str = "leaderboard",
             code: str = CORRECT) -> SubmissionReceived:
    return SubmissionReceived(submission_id=submission_id, leaderboard=leaderboard, gpus=["cpu"], mode=mode,
                              user_id="u1", user_name="alice", file_name="submission.py", code=code,
                              correlation_id=str(submission_id))


def services(database_url: str):
    return running_services(database_url, ledger=(ledger_router, ledger_kit),
                            dispatcher=(dispatcher_router, dispatcher_kit))


async def test_a_ranked_submission_is_accepted_with_a_public_and_a_secret_run(service_database):
    async with services(service_database) as bus:
        await bus.publish(*leaderboards_from_competition(PROBLEMS_ROOT / "examples.yaml", set()))
        await bus.publish(received(1))
        await bus.settle()

        [accepted] = bus.emitted(SubmissionAccepted)
        assert (accepted.submission_id, accepted.leaderboard, accepted.mode) == (1, "vectoradd_py", "leaderboard")
        assert sorted((run.gpu, run.mode, run.secret) for run in accepted.runs) == \
            [("cpu", "leaderboard", False), ("cpu", "private", True)]
        requested = bus.emitted(RunRequested)
        assert sorted(r.run_id for r in requested) == sorted(run.run_id for run in accepted.runs)
        assert all(r.timeout_s > 0 for r in requested)


async def test_a_test_run_is_one_public_run(service_database):
    async with services(service_database) as bus:
        await bus.publish(*leaderboards_from_competition(PROBLEMS_ROOT / "examples.yaml", set()))
        await bus.publish(received(2, mode="test"))
        await bus.settle()
        [accepted] = bus.emitted(SubmissionAccepted)
        assert [(run.mode, run.secret) for run in accepted.runs] == [("test", False)]


async def test_an_unknown_leaderboard_is_refused_with_404_and_nothing_runs(service_database):
    async with services(service_database) as bus:
        await bus.publish(received(3, leaderboard="no_such_board"))
        await bus.settle()
        [rejected] = bus.emitted(SubmissionRejected)
        assert rejected.status_code == 404 and "no_such_board" in rejected.reason
        assert bus.emitted(SubmissionAccepted) == [] and bus.emitted(RunRequested) == []


async def test_a_source_that_patches_the_timer_is_held_or_refused_by_the_precheck(service_database):
    cheat = CORRECT + "\nimport time\ntime.perf_counter = lambda: 0.0\n"
    async with services(service_database) as bus:
        await bus.publish(*leaderboards_from_competition(PROBLEMS_ROOT / "examples.yaml", set()))
        await bus.publish(received(4, code=cheat))
        await bus.settle()
        verdicts = [e.precheck for e in bus.emitted(SubmissionAccepted) + bus.emitted(SubmissionRejected)]
        assert len(verdicts) == 1 and verdicts[0] is not None
        assert any(f.rule == "timer-patch" for f in verdicts[0].findings)
