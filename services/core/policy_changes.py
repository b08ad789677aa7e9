"""Admin changes of policy that both front ends offer: intake on and off, ban and unban. Each publishes its event and
waits (bounded) until the read model shows it, so the admin's next command, and the dispatcher's next admission,
see it.

One decision for both: a ban names a user the platform knows (one who registered or submitted); an unknown id is
refused rather than published, because the read model would have no row to mark and the ban would be lost.
"""

from __future__ import annotations

import uuid

from schemas.policy_events import IntakePaused, IntakeResumed, UserBanned, UserUnbanned
from services.core import admin_repository, settle
from services.core.position import LedgerPosition

PROJECTION_WAIT_S = settle.PROJECTION_WAIT_S


class UnknownUser(LookupError):
    def __init__(self, user_id: str) -> None:
        super().__init__(f"User {user_id} not found")


async def set_intake(broker, position: LedgerPosition, accepting: bool, timeout_s: float = PROJECTION_WAIT_S) -> bool:
    """Open or close intake; False when the read model did not show it within the wait."""
    event = IntakeResumed(change_id=uuid.uuid4().hex) if accepting else IntakePaused(change_id=uuid.uuid4().hex)
    return await settle.publish_and_settle(broker, event, position, timeout_s)


async def set_ban(broker, pool, position: LedgerPosition, user_id: str, banned: bool,
                  timeout_s: float = PROJECTION_WAIT_S) -> bool:
    """Ban or unban a known user (raises UnknownUser otherwise); False when the read model lagged the wait."""
    if await admin_repository.user(pool, user_id) is None:
        raise UnknownUser(user_id)
    event = (UserBanned if banned else UserUnbanned)(user_id=user_id, change_id=uuid.uuid4().hex)
    return await settle.publish_and_settle(broker, event, position, timeout_s)
