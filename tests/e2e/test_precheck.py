"""The source pre-check end to end, through the real HTTP path: a submission firing a `hacked` rule runs but ends
`hacked`, stays off the ranking, and an admin sees the rule that fired; clearing it rescores it onto the board. A
refusing rule answers the submit with its 400; a competition's outcomes change what a rule does."""

from __future__ import annotations

import pytest

from problems import PROBLEMS_ROOT
from tests.support.platform import ADMIN_TOKEN

pytestmark = pytest.mark.slow

VECTORADD = (PROBLEMS_ROOT / "examples" / "vectoradd_py" / "submission.py").read_text()
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
# An honest kernel that reads gc's object list: harness-reach, `hacked` by default, a false positive here.
FALSE_POSITIVE = VECTORADD + "\n\nimport gc\n\nLIVE_OBJECTS = len(gc.get_objects())\n"
THREADED = VECTORADD + "\n\nimport threading\n\nthreading.Thread(target=print).start()\n"
GC_LINE = FALSE_POSITIVE.splitlines().index("LIVE_OBJECTS = len(gc.get_objects())") + 1
THREAD_LINE = THREADED.splitlines().index("threading.Thread(target=print).start()") + 1


def test_a_hacked_submission_stays_off_the_board_until_an_admin_clears_it(platform):
    platform.load_bundled_problems()
    alice = platform.register("2001", "alice")
    bob = platform.register("2002", "bob")
    honest = platform.submit(alice, "vectoradd_py", "cpu", "leaderboard", VECTORADD, "add.py")
    flagged = platform.submit(bob, "vectoradd_py", "cpu", "leaderboard", FALSE_POSITIVE, "add_gc.py")
    assert honest.status_code == 202 and flagged.status_code == 202, (honest.text, flagged.text)
    honest_id, flagged_id = honest.json()["details"]["id"], flagged.json()["details"]["id"]

    assert platform.wait_done(alice, honest_id)["job"]["status"] == "succeeded"
    view = platform.wait_done(bob, flagged_id)
    assert view["job"]["status"] == "hacked"
    assert view["job"]["error"] == (f"Submission rejected by KernelGuard pre-check (line {GC_LINE}: reaches into the "
                                    "harness through __main__, __globals__, sys.modules, gc, inspect or frames). "
                                    "Matched rules: harness-reach.")
    assert any(run["mode"] == "leaderboard" and run["passed"] for run in view["runs"])  # it ran, for the admin
    assert [r["submission_id"] for r in platform.ranking("vectoradd_py", "cpu")] == [honest_id]

    admin_view = platform.http.get(f"/admin/submissions/{flagged_id}", headers=ADMIN).json()["submission"]
    assert admin_view["job_status"] == "hacked"
    assert admin_view["precheck"]["outcome"] == "hacked" and admin_view["precheck"]["rules"] == ["harness-reach"]
    assert admin_view["precheck"]["findings"][0]["line"] == GC_LINE
    assert platform.http.get(f"/admin/submissions/{honest_id}", headers=ADMIN).json()["submission"]["precheck"] \
        is None

    cleared = platform.http.post(f"/admin/submissions/{flagged_id}/precheck/clear", headers=ADMIN,
                                 json={"reason": "gc is only counted"})
    assert cleared.status_code == 200, cleared.text
    assert cleared.json()["precheck"]["cleared_by"] == "admin"
    assert cleared.json()["precheck"]["clear_reason"] == "gc is only counted"
    platform.wait_for(lambda: (platform.submission(bob, flagged_id)["job"]["status"],
                               platform.submission(bob, flagged_id)["job"]["error"]) == ("succeeded", None),
                      "the job reinstated")
    platform.wait_for(lambda: {r["submission_id"] for r in platform.ranking("vectoradd_py", "cpu")}
                      == {honest_id, flagged_id}, "the cleared submission on the board")
    again = platform.http.post(f"/admin/submissions/{flagged_id}/precheck/clear", headers=ADMIN)
    assert again.status_code == 409 and "already cleared" in again.json()["detail"]
    assert platform.http.post(f"/admin/submissions/{honest_id}/precheck/clear", headers=ADMIN).status_code == 404


def test_a_refusing_rule_answers_the_submit_and_competitions_choose_outcomes(platform):
    platform.load_bundled_problems()
    carol = platform.register("2003", "carol")

    refused = platform.submit(carol, "vectoradd_py", "cpu", "leaderboard", THREADED)
    assert refused.status_code == 400
    assert refused.json()["detail"] == (f"Submission rejected by KernelGuard pre-check (line {THREAD_LINE}: starts "
                                        "threads or processes). Matched rules: thread.")
    assert platform.submit(carol, "vectoradd_py", "cpu", "test", THREADED).status_code == 202  # test: unchecked
    unreadable = platform.submit(carol, "vectoradd_py", "cpu", "benchmark", "x = 1" + " + 1" * 200_000 + "\n")
    assert unreadable.status_code == 400  # never admitted unread
    assert unreadable.json()["detail"] == ("KernelGuard pre-check could not read the submission: it is nested too "
                                           "deeply. Please simplify it.")

    bad = platform.http.put("/admin/leaderboards/vectoradd_py/precheck", headers=ADMIN,
                            json={"outcomes": {"threads": "off"}})
    assert bad.status_code == 400 and "unknown pre-check rule 'threads'" in bad.json()["detail"]
    changed = platform.http.put("/admin/leaderboards/vectoradd_py/precheck", headers=ADMIN,
                                json={"outcomes": {"thread": "warn"}})
    assert changed.status_code == 200, changed.text
    assert changed.json()["rules"]["thread"]["outcome"] == "warn"
    assert changed.json()["rules"]["timer-patch"]["outcome"] == "hacked"

    warned = platform.submit(carol, "vectoradd_py", "cpu", "leaderboard", THREADED)
    assert warned.status_code == 202, warned.text
    warned_id = warned.json()["details"]["id"]
    assert platform.wait_done(carol, warned_id)["job"]["status"] == "succeeded"
    verdict = platform.http.get(f"/admin/submissions/{warned_id}/precheck", headers=ADMIN).json()["precheck"]
    assert verdict["outcome"] == "warn" and verdict["rules"] == ["thread"]
    assert [r["submission_id"] for r in platform.ranking("vectoradd_py", "cpu")] == [warned_id]
