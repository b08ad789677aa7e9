"""The open-data export's pure rules: what a request may ask, and which rows go out."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from services.core.opendata.dataset import active_competitions, best_per_code
from services.core.opendata.hf_export import (
    ExportNotConfigured,
    ExportRefused,
    check_request,
    destination,
    write_parquet,
)
from services.gateway.hf_schedule import ExportSchedule
from services.gateway.settings import GatewaySettings

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def row(submission_id: int, user: str, code: int, score: float | None, gpu: str | None = "H100",
        minutes: int = 0) -> dict:
    return {"leaderboard_id": 1, "problem_name": "b", "runner": gpu, "user_id": user, "code_id": code,
            "score": score, "submission_id": submission_id, "submission_time": T0 + timedelta(minutes=minutes)}


def test_one_row_per_leaderboard_user_code_and_gpu_the_best_of_them():
    rows = [row(1, "ada", 1, 2.0), row(2, "ada", 1, 1.0, minutes=1), row(3, "ada", 1, 1.0, minutes=2),
            row(4, "ada", 4, 3.0), row(5, "bob", 1, 1.5), row(6, "ada", 1, 9.0, gpu="B200"),
            row(7, "ada", 7, None, gpu=None), row(8, "ada", 7, None, gpu=None, minutes=1)]
    kept = best_per_code(rows)
    # the best score of each code, the earlier of equal ones; another GPU is another row; a code that never ranked
    # is one row, its first submission
    assert [r["submission_id"] for r in kept] == [2, 5, 4, 6, 7]
    assert [r["submission_id"] for r in best_per_code(rows, ranked_only=True)] == [2, 5, 4, 6]


def test_the_schedule_takes_running_competitions_only():
    boards = [{"id": 1, "name": "nvfp4_gemv", "deadline": T0 + timedelta(days=20)},
              {"id": 2, "name": "nvfp4_gemv-dev", "deadline": T0 + timedelta(days=20)},
              {"id": 3, "name": "vectoradd_v2", "deadline": T0 + timedelta(days=365 * 74)},  # practice, year 2100
              {"id": 4, "name": "amd-fp8-mm", "deadline": T0 - timedelta(days=1)}]
    assert [b["id"] for b in active_competitions(boards, T0)] == [1]


def test_the_schedule_runs_every_6_hours_whenever_a_token_and_a_data_set_are_configured():
    assert GatewaySettings().hf_export_every_h == 6.0
    assert ExportSchedule.wanted(GatewaySettings(hf_token="t", hf_private_dataset="o/live"))
    assert not ExportSchedule.wanted(GatewaySettings(hf_private_dataset="o/live"))
    assert not ExportSchedule.wanted(GatewaySettings(hf_token="t", hf_private_dataset="o/live", hf_export_every_h=0))


def test_the_parquet_schema_is_the_data_sets(tmp_path):
    written = json.loads((Path(__file__).parents[1] / "fixtures" / "kernelbot_data_columns.json").read_text())
    path = tmp_path / "x.parquet"
    write_parquet([], path)
    assert [{"name": f.name, "type": str(f.type)} for f in pq.read_schema(path)] == written["columns"]


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
