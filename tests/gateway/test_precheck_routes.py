"""The pre-check's admin routes through real HTTP (the null GPU answers at once): a competition's outcomes, the
verdict admins see for refused, hacked and warned submissions, clearing and its errors."""

from __future__ import annotations

from tests.gateway.admission import admin, fresh_board
from tests.gateway.conftest import CODE, new_user

TIMER_PATCH = CODE + "\n\nimport time\n\ntime.perf_counter = lambda: 0.0\n"


def test_outcomes_verdicts_and_clearing_with_their_errors(gateway):
    board = fresh_board(gateway, "pc")
    _, cli_id = new_user(gateway)
    shown = admin(gateway, "GET", f"/admin/leaderboards/{board}/precheck").json()["rules"]
    assert shown["timer-patch"] == {"severity": "high", "message": "reassigns a timing or synchronisation API",
                                    "outcome": "hacked", "default": "hacked"}
    for body, status, detail in (([1], 400, "outcomes must be an object of rule name to outcome"),
                                 ({"outcomes": {"timer-patch": 3}}, 400, "outcomes must be an object"),
                                 ({"outcomes": {"timer-patch": "ban"}}, 400, "unknown outcome 'ban'")):
        answer = admin(gateway, "PUT", f"/admin/leaderboards/{board}/precheck", json=body)
        assert answer.status_code == status and detail in answer.json()["detail"], answer.text
    assert admin(gateway, "PUT", "/admin/leaderboards/nope/precheck", json={"outcomes": {}}).status_code == 404
    assert admin(gateway, "GET", "/admin/leaderboards/nope/precheck").status_code == 404

    hacked = gateway.submit(cli_id, board, "null", "leaderboard", TIMER_PATCH).json()["details"]["id"]
    assert gateway.wait_done(cli_id, hacked)["job"]["status"] == "hacked"
    verdict = admin(gateway, "GET", f"/admin/submissions/{hacked}/precheck").json()["precheck"]
    assert verdict["outcome"] == "hacked" and verdict["rules"] == ["timer-patch"] and verdict["cleared_by"] is None
    assert admin(gateway, "POST", f"/admin/submissions/{hacked}/precheck/clear",
                 json={"reason": 5}).status_code == 400
    cleared = admin(gateway, "POST", f"/admin/submissions/{hacked}/precheck/clear", json={"reason": "ours"})
    assert cleared.status_code == 200 and cleared.json()["precheck"]["clear_reason"] == "ours"
    gateway.wait_for(lambda: gateway.submission(cli_id, hacked)["job"]["status"] == "succeeded", "reinstated")
    benchmark = gateway.submit(cli_id, board, "null", "benchmark", TIMER_PATCH).json()["details"]["id"]
    assert gateway.wait_done(cli_id, benchmark)["job"]["status"] == "hacked"  # unranked modes are held too
    assert admin(gateway, "POST", f"/admin/submissions/{benchmark}/precheck/clear").status_code == 200
    gateway.wait_for(lambda: gateway.submission(cli_id, benchmark)["job"]["status"] == "succeeded", "reinstated")

    changed = admin(gateway, "PUT", f"/admin/leaderboards/{board}/precheck",
                    json={"outcomes": {"timer-patch": "refuse"}})
    assert changed.json()["rules"]["timer-patch"]["outcome"] == "refuse"
    refused = gateway.submit(cli_id, board, "null", "benchmark", TIMER_PATCH)
    assert refused.status_code == 400 and "Matched rules: timer-patch." in refused.json()["detail"]
    admin(gateway, "PUT", f"/admin/leaderboards/{board}/precheck", json={"outcomes": {"timer-patch": "warn"}})
    warned = gateway.submit(cli_id, board, "null", "benchmark", TIMER_PATCH).json()["details"]["id"]
    warned_view = gateway.wait_done(cli_id, warned)
    assert warned_view["job"]["status"] == "succeeded"
    assert warned_view["warnings"] == ["KernelGuard pre-check warning: timer-patch"]  # the submitter sees it
    assert gateway.submission(cli_id, hacked)["warnings"] == []
    not_hacked = admin(gateway, "POST", f"/admin/submissions/{warned}/precheck/clear")
    assert not_hacked.status_code == 409 and "was not marked hacked (pre-check outcome: warn)" in not_hacked.text
    assert admin(gateway, "GET", "/admin/submissions/999999999/precheck").status_code == 404
