"""The open-data export's pure rules: what a request may ask, and which rows go out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.core.hf_export import ExportNotConfigured, ExportRefused, best_per_code, check_request, destination
from services.gateway.settings import GatewaySettings

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def row(submission_id: int, user: str, code: str, score: float, gpu: str = "H100", minutes: int = 0) -> dict:
    return {"leaderboard": "b", "gpu": gpu, "user_id": user, "code": code, "score": score,
            "submission_id": submission_id, "submitted_at": T0 + timedelta(minutes=minutes)}


def test_one_row_per_leaderboard_user_code_and_gpu_the_best_of_them():
    rows = [row(1, "ada", "a", 2.0), row(2, "ada", "a", 1.0, minutes=1), row(3, "ada", "a", 1.0, minutes=2),
            row(4, "ada", "b", 3.0), row(5, "bob", "a", 1.5), row(6, "ada", "a", 9.0, gpu="B200")]
    kept = best_per_code(rows)
    # the best score of each code, the earlier of equal ones; another GPU is another row
    assert [r["submission_id"] for r in kept] == [6, 2, 5, 4]


@pytest.mark.parametrize(("ids", "filename", "detail"), [
    ([], "x.parquet", "leaderboard_ids must be a non-empty list of integers"),
    ([True], "x.parquet", "leaderboard_ids must be a non-empty list of integers"),
    (["1"], "x.parquet", "leaderboard_ids must be a non-empty list of integers"),
    (None, "x.parquet", "leaderboard_ids must be a non-empty list of integers"),
    ([1], "x.csv", "filename must end with .parquet"),
    ([1], "/etc/x.parquet", "filename must end with .parquet"),
    ([1], "a/../../x.parquet", "filename must end with .parquet"),
    ([1], None, "filename must end with .parquet"),
])
def test_a_wrong_request_is_refused(ids, filename, detail):
    with pytest.raises(ExportRefused, match=detail):
        check_request(ids, filename)


def test_a_good_request_passes():
    assert check_request([3, 1], "boards/2026.parquet") == ([3, 1], "boards/2026.parquet")


def test_each_destination_needs_a_token_and_its_data_set():
    with pytest.raises(ExportNotConfigured):
        destination(GatewaySettings(hf_private_dataset="o/private"), private=True)
    with pytest.raises(ExportNotConfigured):
        destination(GatewaySettings(hf_token="t", hf_private_dataset="o/private"), private=False)
    to = destination(GatewaySettings(hf_token="t", hf_private_dataset="o/private"), private=True)
    assert (to.token, to.repo_id, to.endpoint) == ("t", "o/private", None)
