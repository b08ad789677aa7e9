"""The pure parts of profiling: admission of capture options, the answer's inline limit, the bundle's size limit,
signed links and torch.profiler's table as CSV."""

from __future__ import annotations

import base64
import io
import json
import os
import zipfile
from datetime import UTC, datetime

from runner.profilers.bundle import bundle, case_directory
from runner.profilers.torch_table import table_csv
from schemas.contracts import ProfileOptions
from services.core.admission import policy
from services.core.admission.policy import LeaderboardView
from services.core.presentation.results import RunOutcome
from services.core.rules import artifact_links
from services.gateway.submitting import profile_answer, sse

BOARD = LeaderboardView(name="qr", gpus=("B200",), deadline=datetime(2100, 1, 1, tzinfo=UTC), lang="py",
                        benchmarks=3)
CODE = "def custom_kernel(data):\n    return data\n"


def admit(mode: str, profile: ProfileOptions | None):
    return policy.admit(leaderboard_name="qr", board=BOARD, gpus=["B200"], mode=mode, file_name="submission.py",
                        code=CODE, now=datetime(2030, 1, 1, tzinfo=UTC), profile=profile)


def test_a_benchmark_index_must_name_one_of_the_board_s_cases():
    assert admit("profile", ProfileOptions(benchmark_index=2)) is None
    refused = admit("profile", ProfileOptions(benchmark_index=3))
    assert refused is not None and refused.status == 400
    assert refused.detail == ("benchmark_index 3 is out of range: leaderboard 'qr' has 3 benchmark cases (0 to 2)")


def test_capture_options_belong_to_profile_mode():
    refused = admit("test", ProfileOptions(kernel_name="gemm"))
    assert refused is not None and refused.detail == "Capture options are for profile submissions only"
    assert admit("profile", None) is None


def zipped(size: int) -> str:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("profile.0-n-1/ncu-details.txt", os.urandom(size))
    return base64.b64encode(buffer.getvalue()).decode()


def outcome(trace: str) -> RunOutcome:
    stage = {"run": {"success": True, "passed": True, "result": {}}, "profile": {"profiler": "Nsight Compute",
                                                                                 "trace": trace}}
    return RunOutcome(gpu="B200", backend="modal", mode="profile", secret=False, completed=True,
                      result={"success": True, "error": "", "system": {}, "runs": {"profile.0": stage}})


def answer(frame: bytes) -> tuple[str, dict]:
    event, data = frame.decode().strip().split("\n")
    return event.removeprefix("event: "), json.loads(data.removeprefix("data: "))


def test_a_profile_over_the_inline_limit_leaves_the_answer_for_its_link():
    state = sse.JobState(deleted=False, done=True, rejected=False, job_status="succeeded", job_error=None)
    small, large = zipped(1000), zipped(profile_answer.INLINE_TRACE_LIMIT)
    link = lambda gpu, stage: f"https://kb.example/profile/artifacts/9/{gpu}/{stage}?x"  # noqa: E731

    event, data = answer(profile_answer.final_event(9, state, [outcome(small)], make_link=link))
    assert event == "result"
    assert data["results"][0]["runs"]["profile.0"]["profile"]["trace"] == small
    assert data["artifacts"][0]["inline"] is True and data["artifacts"][0]["name"] == "profile.0-n-1.zip"

    event, data = answer(profile_answer.final_event(9, state, [outcome(large)], make_link=link))
    profile = data["results"][0]["runs"]["profile.0"]["profile"]
    assert profile["trace"] == "" and profile["download_url"] == link("B200", "profile.0")
    assert data["artifacts"][0]["inline"] is False and data["artifacts"][0]["url"] == profile["download_url"]

    event, data = answer(profile_answer.final_event(9, state, [outcome("")], make_link=link))
    assert event == "error" and data["detail"] == "Profiling failed on B200: profile.0 captured no profile"


def test_a_bundle_over_its_limit_drops_the_raw_report_then_cuts_the_details():
    files = {"ncu-details.txt": b"t" * 1000, "ncu-details.csv": b"c" * 1000, "profile.ncu-rep": os.urandom(200_000)}
    trace = bundle("profile.0-n-1", files, ("ncu-details.txt", "ncu-details.csv"), {"profiler": "ncu"},
                   limit=50_000)
    with zipfile.ZipFile(io.BytesIO(base64.b64decode(trace))) as archive:
        manifest = json.loads(archive.read("profile.0-n-1/manifest.json"))
        assert "profile.0-n-1/profile.ncu-rep" not in archive.namelist()
    assert manifest["omitted"] == ["profile.ncu-rep"] and "cut" not in manifest
    huge = {"ncu-details.txt": os.urandom(300_000), "ncu-details.csv": b"c"}
    trace = bundle("d", huge, ("ncu-details.txt", "ncu-details.csv"), {}, limit=100_000)
    assert len(base64.b64decode(trace)) <= 100_000
    assert case_directory(0, {"batch": 20, "n": 32}) == "profile.0-batch-20-n-32"


def test_links_are_signed_and_expire():
    key = b"k" * 32
    url = artifact_links.link("https://kb.example/", key, 9, "B200", "profile.0", ttl_s=60, now=1000)
    assert url.startswith("https://kb.example/profile/artifacts/9/B200/profile.0?expires=1060&signature=")
    given = url.rsplit("=", 1)[1]
    assert artifact_links.authentic(key, 9, "B200", "profile.0", 1060, given)
    assert not artifact_links.authentic(key, 9, "B200", "profile.1", 1060, given)
    assert not artifact_links.authentic(b"other" * 8, 9, "B200", "profile.0", 1060, given)
    assert not artifact_links.authentic(key, 9, "B200", "profile.0", 1060, "ÌÌ\udcff")  # any text, never an error
    assert not artifact_links.expired(1060, now=1060) and artifact_links.expired(1060, now=1061)


TABLE = """\
-------------------------  ------------  ------------  ------------
                     Name    Self CPU %      Self CPU    # of Calls
-------------------------  ------------  ------------  ------------
            custom_kernel        45.11%      40.000us             1
                aten::add        54.89%      48.672us             1
-------------------------  ------------  ------------  ------------
Self CPU time total: 88.672us
"""


def test_torch_profiler_table_as_csv():
    assert table_csv(TABLE).splitlines() == ['"Name","Self CPU %","Self CPU","# of Calls"',
                                             '"custom_kernel","45.11%","40.000us","1"',
                                             '"aten::add","54.89%","48.672us","1"']
