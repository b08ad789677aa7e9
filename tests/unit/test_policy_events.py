"""Policy events (schemas/policy_events.py): identities that survive a publish retry yet tell a redone change apart,
and their projection plans, which keep stream order inside one ledger batch."""

from __future__ import annotations

from schemas.events import BY_SUBJECT
from schemas.policy_events import (
    POLICY_EVENTS,
    IntakePaused,
    IntakeResumed,
    InviteClaimed,
    InvitesCreated,
    RateLimitCleared,
    RateLimitSet,
    UserBanned,
    UserUnbanned,
)
from services.ledger.projections import plan_batch


def test_every_policy_event_is_in_the_catalogue():
    assert all(BY_SUBJECT[event.subject] is event for event in POLICY_EVENTS)


def test_identities_are_fixed_per_change_and_distinct_between_changes():
    assert UserBanned(user_id="7", change_id="a").event_id == UserBanned(user_id="7", change_id="a").event_id
    assert UserBanned(user_id="7", change_id="a").event_id != UserBanned(user_id="7", change_id="b").event_id
    assert UserBanned(user_id="7", change_id="a").event_id != UserUnbanned(user_id="7", change_id="a").event_id
    created = InvitesCreated(leaderboards=["x"], codes=["c1", "c2"])
    assert created.event_id == InvitesCreated(leaderboards=["x"], codes=["c1", "c2"]).event_id
    # one code is claimed once: a second claimant's message carries the same id and the stream drops it
    assert InviteClaimed(code="c1", user_id="1", user_name="a").event_id == \
        InviteClaimed(code="c1", user_id="2", user_name="b").event_id


def test_a_change_and_its_undoing_in_one_batch_apply_in_stream_order():
    events = [UserBanned(user_id="7", change_id="1"), UserUnbanned(user_id="7", change_id="2"),
              RateLimitCleared(leaderboard="x", mode_category="test", change_id="3"),
              RateLimitSet(leaderboard="x", mode_category="test", max_submissions_per_hour=4, change_id="4"),
              IntakePaused(change_id="5"), IntakeResumed(change_id="6")]
    [plan] = plan_batch(list(enumerate(events, start=1)))
    rows = dict(plan.steps())
    assert rows["user_ban"] == [("7", True), ("7", False)]
    assert rows["rate_limit_put"] == [("x", "test", None), ("x", "test", 4)]
    assert [accepting for accepting, _ in rows["intake_set"]] == [False, True]


def test_created_invites_become_one_row_per_code():
    [plan] = plan_batch([(1, InvitesCreated(leaderboards=["a", "b"], codes=["c1", "c2"]))])
    assert [row[:2] for row in dict(plan.steps())["invite_create"]] == [("c1", ["a", "b"]), ("c2", ["a", "b"])]
