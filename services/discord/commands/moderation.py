"""`/admin ...` for people and their submissions: ban and unban, rename, delete, clear a false hold, read any
submission. Every command checks the Leaderboard Admin role (the table says so).

Each change is published as the event the rest of the platform already knows; the bot decides nothing itself.
"""

from __future__ import annotations

import json
import uuid

import discord

from schemas.events import SubmissionDeleted, UserRenamed
from services.core.admin import policy_changes
from services.core.admin import precheck_review as review
from services.core.infrastructure import settle
from services.core.readmodel import submission_reads
from services.discord import repository as bot_repository
from services.discord.commands.browse import submission_summary
from services.discord.commands.common import reply, text_file
from services.kit.bus import publish


class Confirm(discord.ui.View):
    def __init__(self, user_id: int) -> None:
        super().__init__(timeout=120)
        self.user_id, self.confirmed = user_id, False

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        return interaction.user.id == self.user_id

    @discord.ui.button(label="Delete", style=discord.ButtonStyle.danger)
    async def confirm(self, interaction: discord.Interaction, _button: discord.ui.Button) -> None:
        self.confirmed = True
        await interaction.response.edit_message(content="Deleting …", view=None)
        self.stop()

    @discord.ui.button(label="Cancel", style=discord.ButtonStyle.secondary)
    async def cancel(self, interaction: discord.Interaction, _button: discord.ui.Button) -> None:
        await interaction.response.edit_message(content="Cancelled; nothing was deleted.", view=None)
        self.stop()


async def submission_or_reply(ctx, interaction: discord.Interaction, submission_id: int):
    """The submission's read-model row; None once the admin has been told it does not exist."""
    row = await submission_reads.submission(ctx.pool, submission_id)
    if row is None:
        await reply(interaction, "❌ Submission not found.")
    return row


async def delete_submission(ctx, interaction: discord.Interaction, submission_id: int) -> None:
    row = await submission_or_reply(ctx, interaction, submission_id)
    if row is None:
        return
    view = Confirm(interaction.user.id)
    await reply(interaction, f"Delete submission {submission_id} by {row['user_name']}?", view=view)
    if await view.wait() or not view.confirmed:
        return
    await publish(ctx.broker, SubmissionDeleted(submission_id=submission_id, user_id=str(row["user_id"]),
                                                by_admin=True, correlation_id=str(submission_id)))
    await interaction.edit_original_response(content=f"✅ Submission {submission_id} deleted.", view=None)


async def any_submission(ctx, interaction: discord.Interaction, submission_id: int) -> None:
    row = await submission_or_reply(ctx, interaction, submission_id)
    if row is None:
        return
    await reply(interaction, await submission_summary(ctx, row, include_secret=True),
                files=[text_file(row["file_name"], row["code"])])


async def clear_hold(ctx, interaction: discord.Interaction, submission_id: int, reason: str = "") -> None:
    # the review use case of the admin route and `kernelbot precheck clear`: the scorer reinstates and rescores
    await interaction.response.defer(ephemeral=True, thinking=True)
    try:
        event = await review.build_clear(ctx.pool, submission_id, interaction.user.name, reason)
    except review.PrecheckError as exc:
        await reply(interaction, f"❌ {exc}")
        return
    await settle.publish_and_settle(ctx.broker, event, ctx.position, settle.PROJECTION_WAIT_S)
    await reply(interaction, f"✅ Cleared submission {submission_id}: it is rescored onto its board.")


async def _moderate(ctx, interaction: discord.Interaction, user: discord.User | None, user_id: str | None,
                    banned: bool) -> str | None:
    """The shared ban (services.core.admin.policy_changes) of a Discord user or of any user the platform knows by id or
    name (a popcorn-cli user signed in with GitHub has no Discord account); their name once the read model shows
    it, None once the admin has been told why not."""
    if (user is None) == (user_id is None):
        await reply(interaction, "❌ Name the user: pick a Discord `user`, or give a `user_id` (or name).")
        return None
    await interaction.response.defer(ephemeral=True, thinking=True)  # the wait may pass Discord's 3 s
    try:
        found = await policy_changes.find_user(ctx.pool, str(user.id) if user else user_id)
        await policy_changes.set_ban(ctx.broker, ctx.pool, ctx.position, found["user_id"], banned)
        return found["user_name"]
    except policy_changes.UnknownUser:
        await reply(interaction, f"❌ {user.name if user else user_id} has never used the platform.")
    except policy_changes.AmbiguousUser as exc:
        await reply(interaction, f"❌ {exc}")
    return None


async def ban(ctx, interaction: discord.Interaction, user: discord.User | None = None,
              user_id: str | None = None) -> None:
    name = await _moderate(ctx, interaction, user, user_id, True)
    if name is not None:
        await reply(interaction, f"🚫 {name} is banned.")


async def unban(ctx, interaction: discord.Interaction, user: discord.User | None = None,
                user_id: str | None = None) -> None:
    name = await _moderate(ctx, interaction, user, user_id, False)
    if name is not None:
        await reply(interaction, f"✅ {name} may submit again.")


async def get_user_names(ctx, interaction: discord.Interaction) -> None:
    names = await bot_repository.user_names(ctx.pool)
    await reply(interaction, f"{len(names)} user names; edit and give back with `/admin update-user-names`.",
                files=[text_file("user_names.json", json.dumps(names, indent=2, ensure_ascii=False))])


async def update_user_names(ctx, interaction: discord.Interaction, attachment: discord.Attachment) -> None:
    try:
        mapping = json.loads(await attachment.read())
    except (UnicodeDecodeError, json.JSONDecodeError):
        mapping = None
    if not isinstance(mapping, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and v.strip() and len(v) <= 100 for k, v in mapping.items()):
        await reply(interaction, "❌ Attach a JSON object mapping user ids to names (1 to 100 characters).")
        return
    known = await bot_repository.user_names(ctx.pool)
    changes = {user_id: name.strip() for user_id, name in mapping.items() if known.get(user_id) != name.strip()}
    unknown = [user_id for user_id in changes if user_id not in known]
    for user_id in unknown:
        del changes[user_id]
    tag = uuid.uuid4().hex
    for user_id, name in changes.items():
        await publish(ctx.broker, UserRenamed(user_id=user_id, user_name=name, change_id=tag))
    text = f"✅ Renamed {len(changes)} users."
    if unknown:
        text += f" Unknown user ids left alone: {', '.join(unknown[:20])}"
    await reply(interaction, text)
