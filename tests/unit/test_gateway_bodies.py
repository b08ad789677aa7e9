"""The policy routes' JSON bodies (services/gateway/policy/bodies.py) read as the hand-written checks read them: a
body that is no object is an empty one, each field refused with its documented 400, and nothing coerced (a string
is no number, `true` no integer, `1.0` no count)."""

from __future__ import annotations

import pytest
from fastapi import HTTPException

from services.gateway.policy import bodies
from services.gateway.policy.bodies import read


def refusal(model, body, refusals) -> str | None:
    try:
        read(model, body, refusals)
    except HTTPException as refused:
        assert refused.status_code == 400
        return refused.detail
    return None


VISIBILITY = bodies.VISIBILITY_REFUSALS["visibility"]
CATEGORY, MOST = bodies.RATE_LIMIT_REFUSALS.values()
COUNT = bodies.INVITES_REFUSALS["count"]


@pytest.mark.parametrize(("body", "expected"), [
    ({"visibility": "closed"}, None), ({"visibility": "Public"}, VISIBILITY), ({"visibility": 1}, VISIBILITY),
    (None, VISIBILITY), (["visibility"], VISIBILITY), ("public", VISIBILITY),
])
def test_visibility(body, expected):
    assert refusal(bodies.VisibilityChange, body, bodies.VISIBILITY_REFUSALS) == expected


@pytest.mark.parametrize(("body", "expected"), [
    ({"mode_category": "test", "max_submissions_per_hour": 0}, None),
    ({"mode_category": "benchmark", "max_submissions_per_hour": 3}, CATEGORY),
    ({"mode_category": "bad", "max_submissions_per_hour": "bad"}, CATEGORY),  # the category is checked first
    ({"mode_category": "test", "max_submissions_per_hour": True}, MOST),
    ({"mode_category": "test", "max_submissions_per_hour": 1.0}, MOST),
    ({"mode_category": "test", "max_submissions_per_hour": "3"}, MOST),
    ({"mode_category": "test", "max_submissions_per_hour": -1}, MOST),
    ({"mode_category": "test", "max_submissions_per_hour": 2**31}, MOST),
    ({"mode_category": "test"}, MOST), ([], CATEGORY),
])
def test_rate_limit(body, expected):
    assert refusal(bodies.RateLimitChange, body, bodies.RATE_LIMIT_REFUSALS) == expected


@pytest.mark.parametrize(("body", "names"), [
    ({"count": 2, "leaderboards": ["a", "b"]}, ["a", "b"]),
    ({"count": 1, "leaderboards": [], "leaderboard": "c"}, ["c"]),
    ({"count": 1, "leaderboards": ["a", ""], "leaderboard": "c"}, ["c"]),  # an unusable list falls back
    ({"count": 1, "leaderboards": ["a", 1]}, None), ({"count": 1, "leaderboard": "a\x00"}, None),
    ({"count": 1}, None),
])
def test_invite_boards(body, names):
    assert read(bodies.NewInvites, body, bodies.INVITES_REFUSALS).names() == names


@pytest.mark.parametrize("count", [0, 10_001, True, 1.0, "1", None])
def test_invite_count(count):
    assert refusal(bodies.NewInvites, {"count": count, "leaderboard": "a"}, bodies.INVITES_REFUSALS) == COUNT


def test_join_and_clearing():
    assert read(bodies.InviteClaim, {"code": ""}, bodies.JOIN_REFUSALS).code == ""  # the route: an invalid code
    assert refusal(bodies.InviteClaim, {"code": 5}, bodies.JOIN_REFUSALS) == "Missing required field: code"
    assert refusal(bodies.InviteClaim, None, bodies.JOIN_REFUSALS) == "Missing required field: code"
    assert read(bodies.VerdictClearing, None, bodies.CLEARING_REFUSALS).reason is None
    assert read(bodies.VerdictClearing, {"reason": None}, bodies.CLEARING_REFUSALS).reason is None
    for bad in (1, "a\x00b", ["x"]):
        assert refusal(bodies.VerdictClearing, {"reason": bad}, bodies.CLEARING_REFUSALS) == "reason must be a string"


def test_fields_checked_by_their_use_case_are_kept_as_sent():
    export = read(bodies.HuggingFaceExport, {"leaderboard_ids": ["1", True], "private": 0, "ranked_only": "yes"}, {})
    assert (export.leaderboard_ids, export.private, export.ranked_only, export.filename) == (["1", True], 0, "yes",
                                                                                              None)
    assert read(bodies.PrecheckPolicyChange, {"outcomes": {"r": 1}}, {}).outcomes == {"r": 1}
    assert read(bodies.PrecheckPolicyChange, [], {}).outcomes is None
