"""Admin changes of policy that both front ends offer: intake on and off, ban and unban. Each publishes its event and
waits (bounded) until the read model shows it, so the admin's next command, and the dispatcher's next admission,
see it.

One decision for both: a ban names a user the platform knows (one who registered or submitted); an unknown id is
refused rather than published, because the read model would have no row to mark and the ban would be lost.
"""

from __future__ import annotations

import re
import uuid

from schemas.policy_events import IntakePaused, IntakeResumed, UserBanned, UserUnbanned
from services.core.infrastructure import settle
from services.core.infrastructure.position import LedgerPosition
from services.core.readmodel import admin_reads

PROJECTION_WAIT_S = settle.PROJECTION_WAIT_S


class UnknownUser(LookupError):
    def __init__(self, user_id: str) -> None:
        super().__init__(f"User {user_id} not found")


class AmbiguousUser(LookupError):
    """A name several users share: the admin names one by id."""


MENTION = re.compile(r"<@!?(\d+)>")


async def find_user(pool, reference: str):
    """The user a reference names: their user id (a Discord mention too), else their name, case-insensitively,
    when one user alone has it. UnknownUser or AmbiguousUser otherwise."""
    reference = reference.strip()
    mention = MENTION.fullmatch(reference)
    user_id = mention.group(1) if mention else reference
    found = await admin_reads.user(pool, user_id) if user_id else None
    if found is not None:
        return found
    named = await admin_reads.users_named(pool, reference) if reference else []
    if len(named) > 1:
        raise AmbiguousUser(f"{len(named)} users are named {reference}; give one's user id: "
                            + ", ".join(row["user_id"] for row in named))
    if not named:
        raise UnknownUser(reference)
    return named[0]


async def set_intake(broker, position: LedgerPosition, accepting: bool, timeout_s: float = PROJECTION_WAIT_S) -> bool:
    """Open or close intake; False when the read model did not show it within the wait."""
    event = IntakeResumed(change_id=uuid.uuid4().hex) if accepting else IntakePaused(change_id=uuid.uuid4().hex)
    return await settle.publish_and_settle(broker, event, position, timeout_s)


async def set_ban(broker, pool, position: LedgerPosition, user_id: str, banned: bool,
                  timeout_s: float = PROJECTION_WAIT_S) -> bool:
    """Ban or unban a known user (raises UnknownUser otherwise); False when the read model lagged the wait."""
    if await admin_reads.user(pool, user_id) is None:
        raise UnknownUser(user_id)
    event = (UserBanned if banned else UserUnbanned)(user_id=user_id, change_id=uuid.uuid4().hex)
    return await settle.publish_and_settle(broker, event, position, timeout_s)
