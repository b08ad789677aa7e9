"""What a person sees of a leaderboard's description (Markdown from a problem repository, rendered safely), of an
idle queue, and of a run's report, in headless Chromium."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from problems import PROBLEMS_ROOT
from runner.task.taskfile import load_problem
from schemas.events import LeaderboardCreated
from services.core.presentation import reports
from tests.gateway.test_web_pages import FAST, browser, in_thread, page, web_url  # noqa: F401 - fixtures
from tests.support.platform import Platform

DESCRIPTION = """Return a copy of `data`, a 1-D **float32** tensor.
Inputs come fresh for every call,
and the output must not alias them.

See [the harness](https://example.com/harness) and [this](javascript:alert(3)).
<script>alert(1)</script><img src=x onerror="alert(2)">
"""


def described_board(name: str) -> LeaderboardCreated:
    problem = load_problem(PROBLEMS_ROOT / "examples" / "identity_py")
    return LeaderboardCreated(name=name, description=DESCRIPTION, task=problem.task, task_hash=problem.task_hash,
                              gpus=["null"], deadline=datetime.now(UTC) + timedelta(days=30), secret_seed=5)


def sign_in(web_url, page, gateway: Platform, cli_id: str) -> None:  # noqa: F811 - the fixture's name
    page.goto(f"{web_url}/web/login")
    page.fill("input[name=cli_id]", cli_id)
    page.click("main button[type=submit]")


def test_a_description_is_rendered_markdown_without_its_html(web_url, page, gateway):  # noqa: F811
    in_thread(gateway.add_boards, described_board("web_markdown"))
    page.goto(f"{web_url}/web/leaderboards/web_markdown")

    description = page.locator("#description")
    assert description.locator("code").all_inner_texts() == ["data"]
    assert description.locator("strong").all_inner_texts() == ["float32"]
    assert description.locator("p").count() == 2
    assert description.locator("p").first.locator("br").count() == 2  # the YAML's hard line breaks
    assert description.locator("a").evaluate_all("links => links.map(a => a.getAttribute('href'))") == [
        "https://example.com/harness"]
    text = description.inner_text()
    assert "`" not in text and "**" not in text
    # the HTML is text: no script ran, no element was made of it
    assert '<script>alert(1)</script><img src=x onerror="alert(2)">' in text
    assert page.locator("main script, main img").count() == 0 and page.dialogs == []
    assert "[this](javascript:alert(3))" in text

    page.goto(f"{web_url}/web")
    [summary] = [row for row in page.locator("#leaderboards tr.leaderboard").all()
                 if "web_markdown" in row.inner_text()]
    assert summary.locator("td.desc code").all_inner_texts() == ["data"]


def test_an_idle_gpu_says_a_run_starts_now_and_a_report_is_shown_once(web_url, page, gateway):  # noqa: F811
    in_thread(gateway.add_boards, described_board("web_idle_queue"))
    cli_id = gateway.register("web-idle", "idle-viewer")
    response = gateway.submit(cli_id, "web_idle_queue", "null", "test", FAST)
    submission_id = response.json()["details"]["id"]
    gateway.wait_done(cli_id, submission_id)

    page.goto(f"{web_url}/web/leaderboards/web_idle_queue")
    queue = page.locator("#queue").inner_text()
    # nothing waits and nothing runs on `null` now that the run above is done
    assert queue == "Queue on null: 0 waiting, 0 running; a run submitted now starts at once", queue

    sign_in(web_url, page, gateway, cli_id)
    page.goto(f"{web_url}/web/submissions/{submission_id}")
    report = page.locator("#report")
    assert report.locator("strong").first.inner_text() == "null on null ✅ success"
    assert report.inner_text().count("Testing successful") == 1


def test_a_profile_report_says_profiling_successful_once():
    def case() -> dict:
        return {"run": {"success": True, "passed": True, "exit_code": 0, "result": {}}}

    result = {"success": True, "error": "", "system": {}, "runs": {f"profile.{i}": case() for i in range(4)}}
    status = reports.status_text("H100", "modal", "profile", secret=False, result=result)
    assert status == "**H100 on Modal ✅ success**\n> ✅ Profiling successful"
    assert reports.report("H100", "modal", "profile", secret=False, result=result).count("Profiling successful") == 1
