"""Long polling of GET /user/submissions/{id} (docs/polling.md), with the requests popcorn-cli v1.3.23 sends: the
poll loop's GETs (right after the POST, then 5 s after each answer) are held until the submission is done; a
one-off read (`popcorn submissions show ID`) is answered at once."""

from __future__ import annotations

import time

import pytest

from problems import PROBLEMS_ROOT

IDENTITY = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_text()
SLOW = "import time\n\ndef custom_kernel(data):\n    time.sleep(3)\n    return data.clone()\n"  # 4 tests: >= 12 s


def timed_get(platform, cli_id: str, submission_id: int) -> tuple[dict, float]:
    started = time.monotonic()
    view = platform.submission(cli_id, submission_id)
    return view, time.monotonic() - started


def test_the_first_poll_after_the_post_is_answered_when_the_submission_is_done(platform):
    platform.load_bundled_problems()
    cli_id = platform.register("poller", "poller")
    response = platform.submit(cli_id, "identity_py", "cpu", "test", IDENTITY)
    assert response.status_code == 202, response.text
    view, _ = timed_get(platform, cli_id, response.json()["details"]["id"])  # popcorn-cli's first poll
    assert view["done"] is True and view["job"]["status"] == "succeeded", view
    assert [run["mode"] for run in view["runs"]] == ["test"]


@pytest.mark.slow
def test_a_one_off_read_is_immediate_and_the_next_tick_of_a_poll_loop_is_held(platform):
    platform.load_bundled_problems()
    cli_id = platform.register("reader", "reader")
    response = platform.submit(cli_id, "identity_py", "cpu", "test", SLOW)
    assert response.status_code == 202, response.text
    submission_id = response.json()["details"]["id"]
    time.sleep(2.5)  # past the first-poll window: what `popcorn submissions show ID` looks like

    shown, took = timed_get(platform, cli_id, submission_id)
    assert shown["done"] is False and took < 2.0, (shown["job"], took)
    again, took = timed_get(platform, cli_id, submission_id)  # a second read right away: no loop's 5 s beat
    assert again["done"] is False and took < 2.0, (again["job"], took)

    time.sleep(5)  # popcorn-cli's sleep between an answer and its next poll
    held, took = timed_get(platform, cli_id, submission_id)
    assert held["done"] is True and held["job"]["status"] == "succeeded", held
    assert took > 1.0, took  # it was held until the run ended, not answered from the state before

    done, took = timed_get(platform, cli_id, submission_id)  # a finished submission is never held
    assert done["done"] is True and took < 2.0
