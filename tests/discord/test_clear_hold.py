"""`/admin clear-hold`: the review path of held submissions from Discord, the same use case as the admin route and
`kernelbot precheck clear` (services/core/admin/precheck_review.py). The scorer's side, a rescore that ranks the cleared
submission, is tested end to end in tests/operate/test_floor_holds.py."""

from __future__ import annotations

import asyncio

from schemas.precheck_events import ScoreHeld
from services.kit.bus import publish_all
from tests.discord.test_upstream_names import ADMIN_ROLE, admin_command, role
from tests.discord.wire import Person, option
from tests.support.events import archived

HELD_ID, NEVER_HELD_ID = 990_001, 990_002


async def test_an_admin_clears_a_floor_hold_once_and_others_may_not(wire, platform):
    held = ScoreHeld(submission_id=HELD_ID, leaderboard="fast_board", gpu="null", user_id="u", user_name="ada",
                     run_id=f"{HELD_ID}.null.public", score=1e-9, rule="sibling", reason="one case far ahead",
                     correlation_id=str(HELD_ID))
    await publish_all(platform.nats_url, [held])
    for _ in range(400):  # the ledger archives it, and the review use case reads the archive
        if await asyncio.to_thread(archived, platform.database_url, "ScoreHeld", str(HELD_ID)):
            break
        await asyncio.sleep(0.05)
    admin = Person(9701, "organiser", roles=(role(wire, ADMIN_ROLE),))

    nobody = admin_command(wire, Person(9702, "nobody"), "clear-hold", option("submission_id", HELD_ID, 4))
    assert "needs the Leaderboard Admin role" in await wire.answer(nobody)
    token = admin_command(wire, admin, "clear-hold", option("submission_id", HELD_ID, 4),
                          option("reason", "a special path for the small shape"))
    assert await wire.answer(token, "Cleared") == (f"✅ Cleared submission {HELD_ID}: it is rescored onto its "
                                                   "board.")
    [cleared] = await asyncio.to_thread(archived, platform.database_url, "PrecheckCleared", str(HELD_ID))
    assert (cleared["cleared_by"], cleared["reason"]) == ("organiser", "a special path for the small shape")

    again = admin_command(wire, admin, "clear-hold", option("submission_id", HELD_ID, 4))
    assert await wire.answer(again, "❌") == f"❌ Submission {HELD_ID}'s floor hold was already cleared"
    unknown = admin_command(wire, admin, "clear-hold", option("submission_id", NEVER_HELD_ID, 4))
    assert await wire.answer(unknown, "❌") == (f"❌ Submission {NEVER_HELD_ID} has no pre-check verdict and no "
                                               "floor hold")
