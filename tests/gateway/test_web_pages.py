"""The web pages as a person sees them, in headless Chromium (Debian's chromium, driven through Playwright).

Real ranked submissions through the API, a hostile user name, a closed leaderboard; then the pages are opened and
read the way a person reads them. The null backend gives everyone the same score; the slow test runs the real
harness on the `cpu` GPU for distinct scores.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from problems import PROBLEMS_ROOT
from services.core.rules.noise import Interval, Noise, RunIntervals, score_interval, ties_with_above
from services.gateway.web import ranking_rows as table
from services.gateway.web.charts import Attempt, best_over_time, records
from services.gateway.web.stats import format_seconds
from tests.support.platform import Platform, identity_board

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]
FAST = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_text()
# correct, and measurably slower: the copy made two hundred times over
SLOW = "def custom_kernel(data):\n    out = data.clone()\n    for _ in range(200):\n        out = out.clone()\n    return out\n"
HOSTILE = '<script>alert("pwned")</script><img src=x onerror="alert(2)">'

@pytest.fixture(scope="module")
def browser() -> Iterator:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium package to run the web page tests")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    with tempfile.TemporaryDirectory(prefix="kb-chromium-") as profile, sync_api.sync_playwright() as driver:
        context = driver.chromium.launch_persistent_context(profile, executable_path=str(CHROMIUM), headless=True,
                                                            args=FLAGS)
        try:
            yield context
        finally:
            context.close()


def in_thread(call, *args):
    """Playwright's sync API keeps an event loop running in this thread; asyncio.run needs a thread of its own."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(call, *args).result()


def submit_all(gateway: Platform, board: str, gpu: str, entries: list[tuple[str, str, str, str]]) -> dict:
    """Each (key, user_id, user_name, code) submitted for ranking in that order, then waited for."""
    made = {}
    for key, user_id, user_name, code in entries:
        cli_id = gateway.register(user_id, user_name)
        response = gateway.submit(cli_id, board, gpu, "leaderboard", code, f"{key}.py")
        assert response.status_code == 202, response.text
        made[key] = (cli_id, response.json()["details"]["id"])
    for cli_id, submission_id in made.values():
        job = gateway.wait_done(cli_id, submission_id, timeout=240)["job"]
        assert job["status"] == "succeeded", job
    return made


@pytest.fixture(scope="module")
def ranked(gateway: Platform) -> dict:
    """Three ranked users on `web_null` (the null backend scores everyone alike), the second with a hostile name;
    and a closed board."""
    in_thread(gateway.add_boards, identity_board("web_null", ["null"]), identity_board("web_secret", ["null"], "closed"))
    return submit_all(gateway, "web_null", "null", [
        ("first", "web-first", "speedy", FAST), ("second", "web-hostile", HOSTILE, FAST),
        ("third", "web-third", "third", FAST)])


@pytest.fixture(scope="module")
def web_url(gateway) -> str:
    """The in-process gateway on a real port: the browser connects to it over TCP."""
    return gateway.url


@pytest.fixture
def page(browser):
    tab = browser.new_page()
    dialogs: list[str] = []
    tab.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    tab.dialogs = dialogs
    yield tab
    tab.close()
    browser.clear_cookies()


def test_leaderboard_list_hides_closed_boards(web_url, page, gateway, ranked):
    page.goto(f"{web_url}/")  # the root leads to the list

    assert page.url == f"{web_url}/web"
    names = page.locator("#leaderboards tr.leaderboard td:first-child a").all_inner_texts()
    assert "web_null" in names and "open" in names
    assert "web_secret" not in names and "closed" not in names
    page.goto(f"{web_url}/web/leaderboards/web_secret")
    assert page.locator("h1").inner_text() == "Not found"


def test_ranking_shows_rank_user_score_interval_time_and_a_plot(web_url, page, gateway, ranked):
    page.goto(f"{web_url}/web")
    page.get_by_role("link", name="web_null").first.click()

    rows = page.locator("#ranking tr.entry")
    assert rows.locator("td.user").all_inner_texts() == ["speedy", HOSTILE, "third"]
    # equal scores share the rank, earlier first; equal intervals overlap, so they are marked as ties
    assert rows.locator("td.rank").all_inner_texts() == ["1", "1 ≈ tie", "1 ≈ tie"]
    assert rows.locator("td.score").all_inner_texts() == ["1 µs"] * 3
    assert rows.locator("td.interval").all_inner_texts() == ["1 µs – 1 µs"] * 3
    times = rows.locator("td.time").all_inner_texts()
    assert all(t.endswith(" UTC") for t in times) and times == sorted(times)
    assert rows.locator("td.file").all_inner_texts() == ["first.py", "second.py", "third.py"]
    # the hostile name is text: no script ran, no element was made of it
    assert page.dialogs == []
    assert page.locator("main script, main img").count() == 0

    assert page.locator("#queue").inner_text().startswith("Queue on null: ")

    plot = page.locator("svg.plot")
    assert plot.is_visible()
    assert plot.locator("circle").count() == 3  # one dot per ranked attempt
    assert plot.locator("circle.record").count() == 1  # equal scores never improve on the first
    assert plot.locator("path.best").get_attribute("d").startswith("M")


@pytest.mark.slow
def test_measured_scores_rank_in_order_with_intervals(web_url, page, gateway):
    """The real harness on the `cpu` GPU: a slower kernel ranks second; the plot steps down when it is beaten."""
    in_thread(gateway.add_boards, identity_board("web_cpu", ["cpu"]))
    submit_all(gateway, "web_cpu", "cpu", [("slow", "web-slow", "slowpoke", SLOW), ("fast", "web-fast", "quick", FAST)])
    page.goto(f"{web_url}/web/leaderboards/web_cpu")

    rows = page.locator("#ranking tr.entry")
    assert rows.locator("td.user").all_inner_texts() == ["quick", "slowpoke"]
    assert [text.split()[0] for text in rows.locator("td.rank").all_inner_texts()] == ["1", "2"]
    for row in rows.all():
        low, _, high = row.locator("td.interval").inner_text().partition(" – ")
        assert low and high
    assert page.locator("svg.plot circle.record").count() == 2


def test_a_submission_page_is_for_its_owner_only(web_url, page, gateway, ranked):
    first_cli, first_id = ranked["first"]
    page.goto(f"{web_url}/web/submissions/{first_id}")
    assert page.url.startswith(f"{web_url}/web/login")

    page.fill("input[name=cli_id]", "not-a-cli-id")
    page.click("button[type=submit]")
    assert page.locator("#login-error").is_visible()

    page.goto(f"{web_url}/web/submissions/{first_id}")
    page.fill("input[name=cli_id]", first_cli)
    page.click("main button[type=submit]")

    assert page.url == f"{web_url}/web/submissions/{first_id}"
    assert page.locator("#viewer").inner_text() == "speedy"
    assert page.locator("#status").inner_text() == "succeeded"
    assert "data.clone()" in page.locator("#code").inner_text()
    runs = page.locator("#runs tr.run")
    assert runs.count() == 6  # test, benchmark, leaderboard; public and secret
    for secret_row in runs.filter(has_text="secret").all():
        assert "hidden" in secret_row.inner_text() and secret_row.locator("details").count() == 0
    assert first_cli not in page.content()  # the cookie names the user, never the id

    page.goto(f"{web_url}/web/submissions/{ranked['second'][1]}")  # someone else's
    assert page.locator("h1").inner_text() == "Not found"
    # a job that waits (no runner serves `idle`) shows where it stands in its GPU's queue
    waiting = gateway.submit(first_cli, "idle", "idle", "test", FAST).json()["details"]["id"]
    page.goto(f"{web_url}/web/submissions")
    assert page.locator("#submissions a").all_inner_texts() == [str(waiting), str(first_id)]
    page.get_by_role("link", name=str(waiting)).click()
    assert page.locator("#queue").inner_text().startswith("idle: position ")
    assert "(in progress)" in page.locator("#status").inner_text()
    page.click("header button[type=submit]")  # sign out
    page.goto(f"{web_url}/web/submissions")
    assert page.url.startswith(f"{web_url}/web/login")


def test_pages_never_run_scripts(gateway, ranked):
    response = gateway.http.get("/web/leaderboards/web_null")
    assert "script-src" not in response.headers["content-security-policy"]
    assert "default-src 'none'" in response.headers["content-security-policy"]
    assert "&lt;script&gt;" in response.text and "<script>" not in response.text



# --- pure parts -------------------------------------------------------------------------------------------------


def _result(*cases: tuple[float, float]) -> dict[str, str]:
    result = {"benchmark-count": str(len(cases))}
    for i, (mean, err) in enumerate(cases):
        result |= {f"benchmark.{i}.mean": str(mean), f"benchmark.{i}.err": str(err)}
    return result


def test_the_interval_follows_the_scores_aggregate():
    last = score_interval(_result((2000.0, 100.0)), "last")
    assert (last.low, last.high) == pytest.approx((2e-6 - 1.959964e-7, 2e-6 + 1.959964e-7))
    mean = score_interval(_result((1000.0, 30.0), (3000.0, 40.0)), "mean")
    assert (mean.low, mean.high) == pytest.approx((2e-6 - 1.959964 * 25e-9, 2e-6 + 1.959964 * 25e-9))
    geom = score_interval(_result((1000.0, 0.0), (4000.0, 0.0)), "geom")
    assert (geom.low, geom.high) == pytest.approx((2e-6, 2e-6))
    wide = score_interval(_result((1000.0, 100.0), (4000.0, 400.0)), "geom")
    assert wide.low < 2e-6 < wide.high
    assert score_interval({"benchmark-count": "1"}, "geom") is None
    assert score_interval(None, "last") is None
    assert score_interval(_result((1000.0, float("nan"))), "last") is None


def test_overlapping_neighbours_are_ties():
    intervals = [Interval(1, 2), Interval(1.5, 3), Interval(3.5, 4), None, Interval(0, 9)]
    assert ties_with_above(intervals) == [False, True, False, False, False]


def test_durations_read_in_their_unit():
    assert [format_seconds(v) for v in (1.5, 0.0042, 1e-6, 3.2e-8, None)] == ["1.5 s", "4.2 ms", "1 µs", "32 ns", "—"]


def test_the_plot_steps_down_at_records_and_escapes_names():
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    attempts = [Attempt(t0, 3e-6, "a"), Attempt(t0 + timedelta(hours=1), 4e-6, "b"),
                Attempt(t0 + timedelta(hours=2), 1e-6, HOSTILE)]
    assert [a.score for a in records(attempts)] == [3e-6, 1e-6]
    svg = str(best_over_time(attempts, t0 + timedelta(hours=3)))
    assert svg.count("<circle") == 3 and svg.count('class="record"') == 2
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    assert str(best_over_time([], t0)) == ""


def test_the_ranking_rows_escape_names_mark_ties_and_build_an_entry_once():
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    rows = [{"rank": 1, "user_name": "speedy", "score": 3e-6, "submitted_at": t0, "file_name": "a.py"},
            {"rank": 2, "user_name": HOSTILE, "score": 4e-6, "submitted_at": t0, "file_name": "<b>.py"}]
    noise = [Noise(Interval(2.9e-6, 3.1e-6), False), Noise(Interval(3.0e-6, 5e-6), True)]
    html = str(table.ranking_rows(rows, noise))
    assert html.count('<tr class="entry">') == 2 and html.count("≈ tie") == 1
    assert "<script>" not in html and "&lt;script&gt;" in html and "&lt;b&gt;.py" in html
    assert '<td class="num interval">2.9 µs – 3.1 µs</td>' in html
    built = table._cells.cache_info().misses
    moved = [{**rows[1], "rank": 1}, {**rows[0], "rank": 2}]  # the same two entries at new places
    again = str(table.ranking_rows(moved, [noise[1], Noise(noise[0].interval, True)]))
    assert table._cells.cache_info().misses == built  # nothing built again but the ranks
    assert again.index("&lt;script&gt;") < again.index("speedy")


def test_a_runs_interval_is_told_once_and_never_from_a_result_not_there_yet():
    intervals = RunIntervals(size=2)
    result = json.dumps(_result((2000.0, 100.0)))
    rows = [{"run_id": "1.H100.public", "stage_result": result},
            {"run_id": "2.H100.public", "stage_result": json.dumps(_result((2100.0, 100.0)))}]
    told = intervals.noise(rows, "last")
    assert told[0].interval == score_interval(_result((2000.0, 100.0)), "last") and told[1].tied_within_noise
    # kept: a garbled text under the same run is never parsed again
    assert intervals.interval("1.H100.public", "{not json", "last") == told[0].interval
    assert intervals.interval("3.H100.public", None, "last") is None  # no result yet: told, not kept
    assert intervals.interval("3.H100.public", result, "last") == told[0].interval
    with pytest.raises(json.JSONDecodeError):  # two kept, the least recently asked (run 2) forgotten
        intervals.interval("2.H100.public", "{not json", "last")
