"""The pure parts of profiling: admission of capture options, the answer as popcorn-cli reads it, the bundle's size
limit, the capture flags, upstream's config hash, signed links and torch.profiler's table as CSV."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import zipfile
from datetime import UTC, datetime

import pytest

from runner.profilers.bundle import MAX_ZIP_BYTES, TraceTooLarge, bundle, case_directory, config_sha256
from runner.profilers.ncu import NsightCompute
from runner.profilers.torch_table import table_csv
from schemas.contracts import ProfileOptions
from services.core.admission import policy
from services.core.admission.policy import LeaderboardView
from services.core.presentation.results import RunOutcome
from services.core.rules import artifact_links
from services.gateway.submitting import profile_answer, sse
from tests.support.popcorn_profile import ClientRefused, save_hosted_results

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


def zipped(size: int, manifest: dict | None = None) -> str:
    """A case's zip as the runner bundles it: an incompressible `.ncu-rep` of `size` bytes, the details, a manifest."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("profile.0-n-1/ncu-details.txt", b"details")
        archive.writestr("profile.0-n-1/profile.ncu-rep", os.urandom(size))
        archive.writestr("profile.0-n-1/manifest.json", json.dumps(manifest or {}))
    return base64.b64encode(buffer.getvalue()).decode()


def outcome(trace: str) -> RunOutcome:
    stage = {"run": {"success": True, "passed": True, "result": {"benchmark.0.spec": "n: 1"}},
             "profile": {"profiler": "Nsight Compute", "trace": trace}}
    return RunOutcome(gpu="B200", backend="modal", mode="profile", secret=False, completed=True,
                      result={"success": True, "error": "", "system": {"gpu": "NVIDIA B200", "runtime": "CUDA"},
                              "runs": {"profile.0": stage}})


def answer(frame: bytes) -> tuple[str, dict]:
    event, data = frame.decode().strip().split("\n")
    return event.removeprefix("event: "), json.loads(data.removeprefix("data: "))


DONE = sse.JobState(deleted=False, done=True, rejected=False, job_status="succeeded", job_error=None)
LINK = lambda gpu, stage: f"https://kb.example/profile/artifacts/9/{gpu}/{stage}?x"  # noqa: E731


def test_a_capture_of_megabytes_stays_inline_with_its_link_beside_it_and_the_client_saves_it():
    manifest = {"benchmark": {"index": 0, "case": {"n": 1}}, "capture_options": {"ncu_launch_count": 3},
                "config_sha256": "ab" * 32}
    large = zipped(3 * 1024 * 1024, manifest)  # past the 512 KiB the answer once kept inline
    event, data = answer(profile_answer.final_event(9, DONE, [outcome(large)], make_link=LINK))
    assert event == "result"
    profile = data["results"][0]["runs"]["profile.0"]["profile"]
    assert profile["trace"] == large and profile["download_url"] == LINK("B200", "profile.0")
    assert data["artifacts"][0]["url"] == profile["download_url"] and data["artifacts"][0]["inline"] is True
    (saved,) = save_hosted_results(data)
    assert saved["manifest"]["system"] == {"gpu": "NVIDIA B200", "runtime": "CUDA"}
    assert saved["manifest"]["profile_metadata"] == {"capture_options": {"ncu_launch_count": 3},
                                                     "benchmark_specs": {"0": {"n": 1}}, "config_sha256": "ab" * 32}
    assert len(saved["runs"]["profile.0"]["files"]["profile.ncu-rep"]) == 3 * 1024 * 1024


def test_a_trace_over_the_limit_or_missing_is_an_error_event_never_a_bare_link():
    too_large = "A" * (profile_answer.MAX_TRACE_CHARS + 4)
    event, data = answer(profile_answer.final_event(9, DONE, [outcome(too_large)], make_link=LINK))
    assert event == "error" and data["status_code"] == 400
    assert "over the 32 MiB one case may carry" in data["detail"] and "--ncu-launch-count" in data["detail"]
    event, data = answer(profile_answer.final_event(9, DONE, [outcome("")], make_link=LINK))
    assert event == "error" and data["detail"] == "Profiling failed on B200: profile.0 captured no profile"


def test_the_client_oracle_refuses_what_the_released_client_refuses():
    with pytest.raises(ClientRefused, match="no .ncu-rep"):
        save_hosted_results({"results": [{"success": True, "runs": {"profile.0": {"profile": {
            "trace": base64.b64encode(zipfile_bytes({"d/ncu-details.txt": b"x"})).decode()}}}}]})
    with pytest.raises(ClientRefused, match="No NCU report was produced"):
        save_hosted_results({"results": [{"success": True, "runs": {"profile.0": {"profile": None}}}]})
    with pytest.raises(ClientRefused, match="invalid profile archive"):
        save_hosted_results({"results": [{"success": True, "runs": {"profile.0": {"profile": {"trace": "%%"}}}}]})
    with pytest.raises(ClientRefused, match="no profile runs"):
        save_hosted_results({"results": [{"success": True, "runs": {}}]})


def zipfile_bytes(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def test_a_bundle_over_its_limit_drops_optional_raw_files_but_never_the_ncu_report():
    files = {"rocprof-details.txt": b"t" * 1000, "rocprof-details.csv": b"c" * 1000,
             "raw/1_kernel_trace.csv": os.urandom(200_000)}
    trace = bundle("profile.0-n-1", files, ("rocprof-details.txt", "rocprof-details.csv"), {"profiler": "r"},
                   limit=50_000)
    with zipfile.ZipFile(io.BytesIO(base64.b64decode(trace))) as archive:
        manifest = json.loads(archive.read("profile.0-n-1/manifest.json"))
    assert manifest["omitted"] == ["raw/1_kernel_trace.csv"]
    report = {"ncu-details.txt": b"t", "ncu-details.csv": b"c", "profile.ncu-rep": os.urandom(200_000)}
    with pytest.raises(TraceTooLarge, match="over the 0 MiB one profiled case may carry"):
        bundle("d", report, ("ncu-details.txt", "ncu-details.csv", "profile.ncu-rep"), {}, limit=50_000)
    assert MAX_ZIP_BYTES == profile_answer.MAX_ZIP_BYTES == 32 * 1024 * 1024
    assert case_directory(0, {"batch": 20, "n": 32}) == "profile.0-batch-20-n-32"


def test_capture_options_reach_nsight_compute_as_its_flags():
    argv = NsightCompute().capture_argv(ProfileOptions(kernel_name="regex:gemm|copy", kernel_name_base="demangled",
                                                       launch_count=2), "/tmp/out")
    assert argv[argv.index("--kernel-name") + 1] == "regex:gemm|copy"
    assert argv[argv.index("--kernel-name-base") + 1] == "demangled"
    assert argv[argv.index("--launch-count") + 1] == "2"
    default = NsightCompute().capture_argv(ProfileOptions(), "/tmp/out")
    assert default[default.index("--launch-count") + 1] == "10" and "--kernel-name-base" not in default
    assert ProfileOptions(kernel_name="k", benchmark_index=0, kernel_name_base="mangled").upstream_names() == {
        "benchmark_index": 0, "ncu_kernel_name": "k", "ncu_kernel_name_base": "mangled"}


def test_config_sha256_is_upstream_s_hash_of_the_run_s_configuration():
    payload = {"lang": "py", "main": "eval.py", "sources": {"eval.py": "x"}, "headers": {}, "arch": None,
               "tests": [], "benchmarks": [{"n": 1}], "seed": 5}
    expected = hashlib.sha256(json.dumps({**{k: v for k, v in payload.items() if k != "seed"},
                                          "profile_options": {"ncu_launch_count": 1}}, sort_keys=True).encode())
    assert config_sha256(payload, {"ncu_launch_count": 1}) == expected.hexdigest()


def test_links_are_signed_and_expire():
    key = b"k" * 32
    url = artifact_links.link("https://kb.example/", key, 9, "B200", "profile.0", ttl_s=60, now=1000)
    assert url.startswith("https://kb.example/profile/artifacts/9/B200/profile.0?expires=1060&signature=")
    given = url.rsplit("=", 1)[1]
    assert artifact_links.authentic(key, 9, "B200", "profile.0", 1060, given)
    assert not artifact_links.authentic(key, 9, "B200", "profile.1", 1060, given)
    assert not artifact_links.authentic(b"other" * 8, 9, "B200", "profile.0", 1060, given)
    # the expiry is signed too: a link re-dated into the future is not the link that was made
    assert not artifact_links.authentic(key, 9, "B200", "profile.0", 9_999_999_999, given)
    assert not artifact_links.authentic(key, 10, "B200", "profile.0", 1060, given)
    assert not artifact_links.authentic(key, 9, "H100", "profile.0", 1060, given)
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
