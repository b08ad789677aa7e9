"""The admission rules added to the shared policy (docs/http-api.md "Submitting", steps 1, 2, 5, 14, 15, 16) and the
order of all of them. Pure: what the gateway and the dispatcher both decide with."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.core.admission import policy
from services.core.admission.policy import Applicant, LeaderboardView, RateLimit, Refusal, Refused
from services.core.admission.source_rules import identifier_words

NOW = datetime(2029, 6, 1, 12, 0, tzinfo=UTC)
BOARD = LeaderboardView(name="grayscale", gpus=("H100",), deadline=NOW + timedelta(days=1), lang="py")
CLOSED = LeaderboardView(name="secret", gpus=("H100",), deadline=NOW + timedelta(days=1), lang="py",
                         visibility="closed")
CODE = "def custom_kernel(data):\n    return data\n"
STREAM_DETAIL = ("Your code contains work on another stream. This is not allowed and may result in your "
                 "disqualification. If you think this is a mistake, please contact us.")


def judged(**overrides) -> Refusal | None:
    arguments = {"accepting": True, "applicant": Applicant(), "leaderboard_name": "grayscale", "board": BOARD,
                 "gpus": ["H100"], "mode": "test", "file_name": "submission.py", "content": CODE.encode(), "now": NOW}
    try:
        policy.judge(**(arguments | overrides))
    except Refused as refused:
        return refused.refusal
    return None


def test_everything_in_order_is_accepted_and_described():
    admitted = policy.judge(accepting=True, applicant=Applicant(), leaderboard_name="GrayScale", board=BOARD,
                            gpus=["H100"], mode="LEADERBOARD", file_name="dir/k.py", content=CODE.encode(), now=NOW)
    assert admitted == policy.Admitted(mode="leaderboard", file_name="k.py", code=CODE, category="leaderboard")


def test_step1_kill_switch_is_a_503_before_anything_else():
    closed = Refusal(503, "The bot is currently not accepting any new submissions, please try again later.")
    assert judged(accepting=False, applicant=Applicant(banned=True), mode="nope", board=None) == closed


def test_step2_ban_comes_before_the_mode_and_the_board():
    assert judged(applicant=Applicant(banned=True), mode="nope", board=None) == Refusal(
        403, "You are banned from making submissions.")


def test_step5_closed_boards_take_invited_cli_identities_only():
    assert judged(board=CLOSED, leaderboard_name="secret", applicant=Applicant(via_cli=False, invited=True)) == \
        Refusal(403, "Closed leaderboards only accept submissions via CLI")
    assert judged(board=CLOSED, leaderboard_name="secret", applicant=Applicant(via_cli=True, invited=False)) == \
        Refusal(403, "You do not have access to this leaderboard")
    assert judged(board=CLOSED, leaderboard_name="secret", applicant=Applicant(via_cli=True, invited=True)) is None
    # an unknown board is a 404 first, a wrong GPU only after access
    assert judged(board=None, leaderboard_name="x", applicant=Applicant(via_cli=False)).status == 404
    assert judged(board=CLOSED, leaderboard_name="secret", gpus=["T4"], applicant=Applicant()).status == 403


def test_deadline_is_skipped_only_when_it_does_not_apply():
    late = NOW + timedelta(days=2)
    assert judged(now=late).detail.startswith("The deadline to submit to grayscale has passed.\nIt was ")
    assert judged(now=late, deadline_applies=False) is None


@pytest.mark.parametrize("code", [
    "s = torch.cuda.Stream()", "with torch.cuda.stream(s):", "cudaStream_t s;", "cudaStreamCreate(&s);",
    "# uses two streams", "x = 'side_stream'", "STREAMS = 2", "myCUDAStream = 1",
])
def test_step14_work_on_another_stream_is_refused(code: str):
    assert judged(content=code.encode()) == Refusal(400, STREAM_DETAIL)


@pytest.mark.parametrize("code", [
    "# upstream and downstream, mainstream", "def streamline(): pass", "class Streamer: pass",
    "s = torch.cuda.current_stream()", "auto s = at::cuda::getCurrentCUDAStream();",
])
def test_step14_words_that_only_contain_stream_and_reading_the_current_stream_pass(code: str):
    assert judged(content=code.encode()) is None


@pytest.mark.parametrize("name", ["shit.py", "my_fucking_kernel.py", "sh1t.py", "KernelOfCrap.py", "a-cunt.py"])
def test_step11_rude_file_names_are_refused(name: str):
    assert judged(file_name=name) == Refusal(400, "Please provide a non-rude filename")


@pytest.mark.parametrize("name", ["class.py", "assemble.py", "scunthorpe.py", "cocktail_sort.py", "shitake.py"])
def test_step11_words_that_only_contain_a_rude_word_pass(name: str):
    assert judged(file_name=name) is None


def test_step11_comes_after_the_extension_and_before_the_content():
    assert judged(file_name="shit.txt").detail.startswith("Please provide a Python")
    assert judged(file_name="shit.py", content=b"").detail == "Please provide a non-rude filename"


def test_identifier_words_split_at_underscores_and_camel_case():
    assert identifier_words("getCurrentCUDAStream") == ["get", "current", "cuda", "stream"]
    assert identifier_words("cudaStream_t") == ["cuda", "stream", "t"]
    assert identifier_words("HTTPServer2Go") == ["http", "server2", "go"]


def test_step15_leaderboard_directive_must_match_case_insensitively():
    header = "#!/usr/bin/env python\n#!POPCORN leaderboard GrayScale\n#!POPCORN gpus T4 A100\n" + CODE
    assert judged(content=header.encode()) is None
    other = "// comment\n//!POPCORN leaderboard vectoradd\n" + CODE
    assert judged(content=other.encode()) == Refusal(
        400, "Leaderboard name `grayscale` specified in the command doesn't match the one in the submission script "
             "header `vectoradd`.")


def test_step15_only_the_leading_comment_block_is_read():
    below_code = CODE + "#!POPCORN leaderboard elsewhere\n#!POPCORN nonsense x\n"
    assert judged(content=below_code.encode()) is None


@pytest.mark.parametrize(("header", "detail"), [
    ("#!POPCORN leaderboard", "!POPCORN directive missing argument: #!POPCORN leaderboard"),
    ("#!POPCORN", "!POPCORN directive missing argument: #!POPCORN"),
    ("#!POPCORN Team x", "Invalid !POPCORN directive: team"),
    ("#!POPCORN leaderboard a\n#!POPCORN LEADERBOARD a", "Found multiple values for !POPCORN directive leaderboard"),
    ("#!POPCORN leaderboard a b", "Found multiple values for !POPCORN directive leaderboard"),
    ("#!POPCORN gpu T4\n#!POPCORN gpus H100", "Found multiple values for !POPCORN directive gpus"),
])
def test_step15_malformed_directives(header: str, detail: str):
    assert judged(content=(header + "\n" + CODE).encode()) == Refusal(400, detail)


def test_step15_directive_token_is_case_sensitive():
    assert judged(content=("#!popcorn leaderboard elsewhere\n" + CODE).encode()) is None


def test_step16_rate_limit_counts_the_last_hour_and_names_the_retry_time():
    recent = (NOW - timedelta(minutes=50), NOW - timedelta(minutes=10), NOW - timedelta(hours=2))
    assert judged(rate_limit=RateLimit(3, recent)) is None  # the two-hour-old one has left the window
    assert judged(rate_limit=RateLimit(2, recent)) == Refusal(
        429, "Rate limit exceeded: 2/2 test submissions per hour. Try again in 600s.", retry_after_s=600)
    # with more counted than allowed (the limit was lowered), a slot frees when enough of them have left
    assert judged(rate_limit=RateLimit(1, recent)).retry_after_s == 3000


def test_step16_category_follows_the_mode():
    recent = (NOW - timedelta(seconds=3599.2),)
    assert judged(mode="leaderboard", rate_limit=RateLimit(1, recent)) == Refusal(
        429, "Rate limit exceeded: 1/1 leaderboard submissions per hour. Try again in 1s.", retry_after_s=1)
    assert [policy.rate_category(m) for m in policy.USER_MODES] == ["test", "test", "leaderboard", "test"]


def test_step16_zero_disables_the_category_without_a_retry_time():
    assert judged(rate_limit=RateLimit(0, ())) == Refusal(
        429, "Rate limit exceeded: 0/0 test submissions per hour. Submissions of this kind are currently disabled "
             "for this leaderboard.")


def test_order_content_rules_come_after_the_file_and_before_the_rate_limit():
    streams_and_header = (b"#!POPCORN leaderboard other\ns = torch.cuda.Stream()\n")
    assert judged(content=streams_and_header, rate_limit=RateLimit(0, ())).detail == STREAM_DETAIL
    assert judged(content=b"#!POPCORN leaderboard other\n", rate_limit=RateLimit(0, ())).status == 400
    assert judged(content=b"\xff", rate_limit=RateLimit(0, ())).detail.startswith("Failed to decode")


def test_the_dispatchers_admit_takes_the_same_rules():
    assert policy.admit(leaderboard_name="grayscale", board=BOARD, gpus=["H100"], mode="test",
                        file_name="s.py", code=CODE, now=NOW, applicant=Applicant(banned=True)).status == 403
    assert policy.admit(leaderboard_name="grayscale", board=BOARD, gpus=["H100"], mode="test",
                        file_name="s.py", code=CODE, now=NOW, accepting=False).status == 503
