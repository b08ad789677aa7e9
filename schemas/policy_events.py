"""Policy changes as events (docs/architecture.md "The event catalogue"): the kill switch, bans, rate limits, invites
and leaderboard visibility. Each is decided by an admin (or, for a claim, a user) at the gateway.

A change that may be made, undone and made again (ban, unban, ban) carries the `change_id` of the request that made
it, so its message id is fixed across publish retries yet distinct from the same change made later.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from schemas.envelope import Event

RateCategory = Literal["test", "leaderboard"]


class IntakePaused(Event):
    """Submission intake closed (kill switch): new submissions are refused; accepted ones continue."""

    subject = "evt.intake.paused"
    change_id: str

    def identity(self) -> str:
        return self.change_id


class IntakeResumed(Event):
    subject = "evt.intake.resumed"
    change_id: str

    def identity(self) -> str:
        return self.change_id


class UserBanned(Event):
    """The user may no longer submit; existing results stay visible."""

    subject = "evt.user.banned"
    user_id: str
    change_id: str

    def identity(self) -> str:
        return f"{self.user_id}:{self.change_id}"


class UserUnbanned(Event):
    subject = "evt.user.unbanned"
    user_id: str
    change_id: str

    def identity(self) -> str:
        return f"{self.user_id}:{self.change_id}"


class RateLimitSet(Event):
    """At most `max_submissions_per_hour` accepted submissions per user of this category on the leaderboard
    (0 blocks the category); replaces an earlier limit of the same category."""

    subject = "evt.rate_limit.set"
    leaderboard: str
    mode_category: RateCategory
    max_submissions_per_hour: int
    change_id: str

    def identity(self) -> str:
        return f"{self.leaderboard}:{self.mode_category}:{self.change_id}"


class RateLimitCleared(Event):
    """The category is unlimited again."""

    subject = "evt.rate_limit.cleared"
    leaderboard: str
    mode_category: RateCategory
    change_id: str

    def identity(self) -> str:
        return f"{self.leaderboard}:{self.mode_category}:{self.change_id}"


class InvitesCreated(Event):
    """Fresh invite codes, each unlocking every listed (closed) leaderboard for the one user who claims it."""

    subject = "evt.invite.created"
    leaderboards: list[str]
    codes: list[str]

    def identity(self) -> str:
        return hashlib.sha256("\n".join(self.codes).encode()).hexdigest()[:32]


class InviteClaimed(Event):
    """A user claimed a code; a code is claimed once, so the code is the identity."""

    subject = "evt.invite.claimed"
    code: str
    user_id: str
    user_name: str

    def identity(self) -> str:
        return self.code


class InviteRevoked(Event):
    """The code is gone; the access it granted ends."""

    subject = "evt.invite.revoked"
    code: str

    def identity(self) -> str:
        return self.code


class LeaderboardVisibilityChanged(Event):
    subject = "evt.leaderboard.visibility_changed"
    leaderboard: str
    visibility: Literal["public", "closed"]
    change_id: str

    def identity(self) -> str:
        return f"{self.leaderboard}:{self.change_id}"


POLICY_EVENTS: tuple[type[Event], ...] = (
    IntakePaused, IntakeResumed, UserBanned, UserUnbanned, RateLimitSet, RateLimitCleared, InvitesCreated,
    InviteClaimed, InviteRevoked, LeaderboardVisibilityChanged,
)
