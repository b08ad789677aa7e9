"""The submit use case both front ends translate into (services.core.submission.submit): what the preliminary
admission lets through, and the SubmissionReceived it records. Pure: the read model's facts are given."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from schemas.contracts import ProfileOptions
from schemas.events import SubmissionReceived
from services.core.admission import policy
from services.core.admission.policy import LeaderboardView, RateLimit, Refusal, Refused
from services.core.submission import submit

NOW = datetime(2029, 6, 1, 12, 0, tzinfo=UTC)
BOARD = LeaderboardView(name="GrayScale", gpus=("H100", "A100"), deadline=NOW + timedelta(days=1), lang="py",
                        benchmarks=2)
OPEN = submit.Facts(accepting=True, invited=False, board_name="GrayScale", board=BOARD, rate_limit=None)
CODE = "def custom_kernel(data):\n    return data\n"
CLI_USER = submit.Submitter(user_id="github:7", user_name="ada", via_cli=True)
DISCORD_USER = submit.Submitter(user_id="4242", user_name="Grace", via_cli=False, origin="discord")
ENTRY = submit.Entry(leaderboard="grayscale", gpus=("H100",), mode="leaderboard", file_name="dir/kernel.py",
                     content=CODE.encode())


def refusal(facts: submit.Facts = OPEN, submitter: submit.Submitter = CLI_USER,
            entry: submit.Entry = ENTRY, now: datetime = NOW) -> Refusal:
    with pytest.raises(Refused) as refused:
        submit.judge(facts, submitter, entry, now)
    return refused.value.refusal


def test_an_admitted_cli_submission_is_recorded_under_the_boards_own_name_and_the_admitted_file():
    admission = submit.judge(OPEN, CLI_USER, ENTRY, NOW)
    assert admission.admitted == policy.Admitted(mode="leaderboard", file_name="kernel.py", code=CODE,
                                                 category="leaderboard")
    received = admission.received(17)
    assert received == SubmissionReceived(
        submission_id=17, leaderboard="GrayScale", gpus=["H100"], mode="leaderboard", user_id="github:7",
        user_name="ada", file_name="kernel.py", code=CODE, origin="http", via_cli=True, deadline_applies=True,
        correlation_id="17", profile=None, occurred_at=received.occurred_at)
    assert received.event_id == "SubmissionReceived:17"  # a retry publishes the same id; the stream keeps one


def test_a_discord_submission_says_where_it_came_from_and_keeps_every_gpu_asked_for():
    entry = replace(ENTRY, gpus=("H100", "A100"), mode="test")
    received = submit.judge(OPEN, DISCORD_USER, entry, NOW).received(18)
    assert (received.origin, received.via_cli, received.gpus, received.mode) == ("discord", False,
                                                                                ["H100", "A100"], "test")
    assert (received.user_id, received.user_name) == ("4242", "Grace")


def test_a_closed_board_admits_an_invited_cli_identity_and_refuses_discord_even_when_invited():
    closed = replace(OPEN, invited=True, board=replace(BOARD, visibility="closed"))
    assert submit.judge(closed, CLI_USER, ENTRY, NOW).board_name == "GrayScale"
    assert refusal(closed, DISCORD_USER) == Refusal(403, policy.CLOSED_NEEDS_CLI)
    assert refusal(replace(closed, invited=False), CLI_USER) == Refusal(403, policy.NO_ACCESS)


def test_the_submitter_ban_and_the_read_models_intake_and_rate_limit_refuse():
    assert refusal(submitter=replace(DISCORD_USER, banned=True)) == Refusal(403, policy.BANNED)
    assert refusal(replace(OPEN, accepting=False)) == Refusal(503, policy.INTAKE_CLOSED)
    recent = (NOW - timedelta(minutes=30),)
    assert refusal(replace(OPEN, rate_limit=RateLimit(1, recent))).retry_after_s == 30 * 60
    assert submit.judge(replace(OPEN, rate_limit=RateLimit(2, recent)), CLI_USER, ENTRY, NOW)


def test_an_unknown_board_is_refused_before_anything_is_recorded():
    unknown = replace(OPEN, board_name=None, board=None)
    assert refusal(unknown).status == 404


def test_only_the_admin_route_submits_after_the_deadline_and_the_event_says_so():
    late = NOW + timedelta(days=2)
    assert refusal(now=late).status == 400
    admission = submit.judge(OPEN, CLI_USER, replace(ENTRY, deadline_applies=False), late)
    assert admission.received(19).deadline_applies is False


def test_profile_options_are_checked_against_the_board_and_carried_in_the_event():
    options = ProfileOptions(benchmark_index=1, kernel_name="regex:gray.*")
    profile = replace(ENTRY, mode="profile", profile=options)
    assert submit.judge(OPEN, CLI_USER, profile, NOW).received(20).profile == options
    out_of_range = replace(profile, profile=ProfileOptions(benchmark_index=2))
    assert "out of range" in refusal(entry=out_of_range).detail
    assert refusal(entry=replace(ENTRY, profile=options)) == Refusal(
        400, "Capture options are for profile submissions only")
