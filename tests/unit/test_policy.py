"""Admission (services/core/admission/policy.py) against docs/http-api.md "Submitting": each refusal's status and exact
detail."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.core.admission import policy
from services.core.admission.policy import LeaderboardView, Refusal, Refused

DEADLINE = datetime(2030, 1, 1, tzinfo=UTC)
BEFORE = DEADLINE - timedelta(days=1)
AFTER = DEADLINE + timedelta(days=1)
PY_BOARD = LeaderboardView(name="grayscale", gpus=("T4", "H100"), deadline=DEADLINE, lang="py")
CU_BOARD = LeaderboardView(name="vectoradd", gpus=("H100",), deadline=DEADLINE, lang="cu")


def admit(**overrides) -> Refusal | None:
    arguments = dict(
        leaderboard_name="grayscale", board=PY_BOARD, gpus=["H100"], mode="test", file_name="submission.py",
        code="def custom_kernel(data):\n    return data\n", now=BEFORE,
    )
    return policy.admit(**(arguments | overrides))


def refusal(call, *args, **kwargs) -> Refusal:
    with pytest.raises(Refused) as caught:
        call(*args, **kwargs)
    assert str(caught.value) == caught.value.refusal.detail
    return caught.value.refusal


# --------------------------------------------------------------------------------------------- acceptance


@pytest.mark.parametrize("mode", ["test", "benchmark", "leaderboard", "profile"])
def test_a_valid_submission_is_accepted_in_every_user_mode(mode: str) -> None:
    assert admit(mode=mode) is None


def test_a_cuda_file_is_accepted_on_a_cuda_leaderboard() -> None:
    assert admit(leaderboard_name="vectoradd", board=CU_BOARD, file_name="kernel.cu", code="__global__ void k(){}") is None


def test_acceptance_on_the_deadline_itself() -> None:
    assert admit(now=DEADLINE) is None


# ------------------------------------------------------------------------------------------------- step 3


@pytest.mark.parametrize("mode", ["TEST", "Leaderboard", "benchMARK"])
def test_mode_is_lower_cased(mode: str) -> None:
    assert policy.check_mode(mode) == mode.lower()
    assert admit(mode=mode) is None


@pytest.mark.parametrize(("mode", "detail"), [
    ("script", "Invalid submission mode value: 'script'"),
    ("Bogus", "Invalid submission mode value: 'bogus'"),
    ("", "Invalid submission mode value: ''"),
    ("private", "Submission mode 'private' is not supported for this endpoint"),
    ("PRIVATE", "Submission mode 'private' is not supported for this endpoint"),
])
def test_step3_mode(mode: str, detail: str) -> None:
    assert admit(mode=mode) == Refusal(400, detail)


# ------------------------------------------------------------------------------------------------- step 4


def test_step4_unknown_leaderboard_is_404() -> None:
    assert admit(leaderboard_name="nope", board=None) == Refusal(404, "Leaderboard `nope` does not exist.")


# ------------------------------------------------------------------------------------------------- step 6


def test_step6_gpu_not_on_the_leaderboard_lists_the_supported_ones() -> None:
    assert admit(gpus=["A100"]) == Refusal(
        400, "GPU type 'A100' is not supported for leaderboard 'grayscale'. Supported GPUs: H100, T4"
    )


def test_step6_gpu_match_is_exact() -> None:
    assert admit(gpus=["h100"]).status == 400


def test_step6_leaderboard_without_gpus() -> None:
    board = LeaderboardView(name="empty", gpus=(), deadline=DEADLINE, lang="py")
    assert admit(leaderboard_name="empty", board=board) == Refusal(400, "No available GPUs for leaderboard `empty`.")


def test_every_selected_gpu_is_checked() -> None:
    assert admit(gpus=["H100", "MI300"]).detail.startswith("GPU type 'MI300' is not supported")


# ------------------------------------------------------------------------------------------------- step 7


def test_step7_deadline_passed() -> None:
    now = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert admit(now=now) == Refusal(
        400,
        "The deadline to submit to grayscale has passed.\n"
        "It was 2030-01-01 00:00:00+00:00 and today is 2030-01-02 03:04:05+00:00.",
    )


def test_step7_applies_to_test_mode_too() -> None:
    assert admit(mode="test", now=AFTER).detail.startswith("The deadline to submit to grayscale has passed.")


# ------------------------------------------------------------------------------------------------- step 8


@pytest.mark.parametrize(("raw", "name"), [
    (None, "submission.py"),
    ("", "submission.py"),
    ("dir/sub/kernel.py", "kernel.py"),
    ("C:\\Users\\ada\\kernel.py", "kernel.py"),
    ("../../etc/kernel.py", "kernel.py"),
    ("x" * 252 + ".py", "x" * 252 + ".py"),
])
def test_step8_file_name_is_the_basename(raw: str | None, name: str) -> None:
    assert policy.normalise_file_name(raw) == name


def test_step8_file_name_too_long() -> None:
    assert refusal(policy.normalise_file_name, "x" * 253 + ".py") == Refusal(400, "File name is too long")
    assert admit(file_name="a/" + "x" * 256 + ".py") == Refusal(400, "File name is too long")


def test_empty_file_name_defaults_to_python_and_is_accepted() -> None:
    assert admit(file_name="") is None


# ---------------------------------------------------------------------------------------------- steps 9-13

ARCHIVE = "Archive submissions are not supported; submit a single .py, .cu, .cuh or .cpp file."
EXTENSION = "Please provide a Python (.py) or CUDA (.cu / .cuh / .cpp) file"


@pytest.mark.parametrize("name", ["s.tar.gz", "s.TGZ", "s.Zip", "kernel.py.zip"])
def test_step9_archives(name: str) -> None:
    assert refusal(policy.check_file, PY_BOARD, name, b"data") == Refusal(400, ARCHIVE)
    assert admit(file_name=name) == Refusal(400, ARCHIVE)


@pytest.mark.parametrize("name", ["s.txt", "s", "s.tar", "s.pyc", "s.cu.bak"])
def test_step10_extension(name: str) -> None:
    assert admit(file_name=name) == Refusal(400, EXTENSION)


def test_step10_extension_is_case_insensitive() -> None:
    assert admit(file_name="Kernel.PY") is None


def test_language_of_the_leaderboard() -> None:
    refused = admit(file_name="kernel.cu")
    assert refused is not None and refused.status == 400 and ".py" in refused.detail


def test_step12_empty_file() -> None:
    expected = Refusal(400, "Empty file submitted. Please provide a file with code.")
    assert refusal(policy.check_file, PY_BOARD, "s.py", b"") == expected
    assert admit(code="") == expected


def test_step12_size_limit_is_one_million_bytes() -> None:
    assert policy.check_file(PY_BOARD, "s.py", b"#" * 1_000_000) == "#" * 1_000_000
    expected = Refusal(413, "Submission file is too large (limit: 1MB).")
    assert refusal(policy.check_file, PY_BOARD, "s.py", b"#" * 1_000_001) == expected
    # Bytes, not characters: 500,001 two-byte characters are over the limit.
    assert admit(code="é" * 500_001) == expected


@pytest.mark.parametrize("content", [b"\xff\xfe\xfa", b"print('\xc3')", b"a\x00b"])
def test_step13_not_utf8(content: bytes) -> None:
    detail = "Failed to decode submission file content as UTF-8."
    assert refusal(policy.check_file, PY_BOARD, "s.py", content) == Refusal(400, detail)


def test_step13_lone_surrogate_in_received_code() -> None:
    assert admit(code="x = '\udc80'") == Refusal(400, "Failed to decode submission file content as UTF-8.")


def test_check_file_returns_the_decoded_code() -> None:
    assert policy.check_file(PY_BOARD, "s.py", "π = 3\n".encode()) == "π = 3\n"


# -------------------------------------------------------------------------------------------------- order


def test_order_mode_before_leaderboard() -> None:
    assert admit(mode="bogus", leaderboard_name="nope", board=None).status == 400


def test_order_leaderboard_before_gpu() -> None:
    assert admit(leaderboard_name="nope", board=None, gpus=["A100"]).status == 404


def test_order_gpu_before_deadline() -> None:
    assert admit(gpus=["A100"], now=AFTER).detail.startswith("GPU type 'A100'")


def test_order_deadline_before_file() -> None:
    assert admit(now=AFTER, file_name="x" * 300, code="").detail.startswith("The deadline")


def test_order_file_name_before_archive() -> None:
    assert admit(file_name="x" * 300 + ".zip").detail == "File name is too long"


def test_order_archive_before_extension_before_content() -> None:
    assert admit(file_name="s.zip", code="").detail == ARCHIVE
    assert admit(file_name="s.txt", code="").detail == EXTENSION


def test_order_empty_before_utf8() -> None:
    assert refusal(policy.check_file, PY_BOARD, "s.py", b"").status == 400
    assert refusal(policy.check_file, PY_BOARD, "s.py", b"\xff" * 1_000_001).status == 413
