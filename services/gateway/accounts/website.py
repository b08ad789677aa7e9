"""A website that signs people in itself (kernelboard, as on upstream's database): the web id it wrote into
`leaderboard.user_info` identifies its user on the submit route it calls, and nowhere else (docs/security.md, "The
website's role"). A user the platform does not know yet is recorded first, so that bans and renames reach them."""

from __future__ import annotations

from faststream.nats import NatsBroker

from schemas.auth_events import WebsiteUserSignedIn
from services.core.infrastructure import settle
from services.core.infrastructure.position import LedgerPosition
from services.core.readmodel import user_reads


async def signed_in(pool, broker: NatsBroker, position: LedgerPosition, web_id: str, timeout_s: float):
    """The website's user behind `web_id` (user_id, user_name, banned), or None when the website gave it nobody."""
    row = await user_reads.user_by_website(pool, web_id)
    if row is None:
        return None
    if not row["known"]:
        await settle.publish_and_settle(broker, WebsiteUserSignedIn(user_id=row["user_id"], user_name=row["user_name"]),
                                        position, timeout_s)
    return row
