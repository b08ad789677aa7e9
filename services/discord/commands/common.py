"""What the commands share: replies, who may run what, leaderboard autocomplete."""

from __future__ import annotations

import io
import logging

import discord
from discord import app_commands

from services.discord import repository
from services.discord.layout import ADMIN_ROLE
from services.dispatcher import policy

MAX_CHOICES = 25
log = logging.getLogger("kernelbot.discord")


async def reply(interaction: discord.Interaction, content: str, *, files: list[discord.File] | None = None,
                view: discord.ui.View | None = None) -> None:
    """An ephemeral answer, whether or not the interaction was answered (deferred) already."""
    content = content[:2000]
    kwargs = {"files": files or []}
    if view is not None:
        kwargs["view"] = view
    if interaction.response.is_done():
        await interaction.followup.send(content, ephemeral=True, **kwargs)
    else:
        await interaction.response.send_message(content, ephemeral=True, **kwargs)


def refusal_text(refused: policy.Refused) -> str:
    return f"❌ {refused.refusal.detail}"


def text_file(name: str, text: str) -> discord.File:
    return discord.File(io.BytesIO(text.encode()), filename=name)


def is_admin(interaction: discord.Interaction) -> bool:
    """Holds the admin role the bot found or created at start-up, by id: another role given the same name by
    someone who may manage roles does not count."""
    layout = interaction.client.ctx.layout
    admin_id = (layout.roles or {}).get(ADMIN_ROLE) if layout else None
    roles = getattr(interaction.user, "roles", None) or []  # a DM's user has none
    return admin_id is not None and any(role.id == admin_id for role in roles)


def admin_only():
    """Every admin command checks the Leaderboard Admin role, whatever Discord's command permissions say."""
    async def predicate(interaction: discord.Interaction) -> bool:
        if not is_admin(interaction):
            raise app_commands.CheckFailure(f"This command needs the {ADMIN_ROLE} role.")
        return True

    return app_commands.check(predicate)


def administrator_only():
    async def predicate(interaction: discord.Interaction) -> bool:
        if not interaction.permissions.administrator:
            raise app_commands.CheckFailure("This command needs Discord's Administrator permission.")
        return True

    return app_commands.check(predicate)


async def on_error(interaction: discord.Interaction, error: app_commands.AppCommandError) -> None:
    """Refused checks and failed commands answer the user; nothing fails silently."""
    if isinstance(error, app_commands.CheckFailure):
        await reply(interaction, f"⛔ {error}")
        return
    log.error("command %s failed", interaction.command and interaction.command.qualified_name, exc_info=error)
    await reply(interaction, "❌ The command failed; the error is logged.")


async def quiet_tree_errors(interaction: discord.Interaction, error: app_commands.AppCommandError) -> None:
    """The tree's own handler: the command's handlers have answered already; log only what is not a refusal."""
    if not isinstance(error, app_commands.CheckFailure):
        log.debug("command error handled: %r", error)


def board_autocomplete(ctx):
    async def complete(_interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        names = await repository.active_boards(ctx.pool)
        matching = [n for n in names if current.lower() in n.lower()][:MAX_CHOICES]
        return [app_commands.Choice(name=n, value=n) for n in matching]

    return complete


def who(interaction: discord.Interaction):
    from services.discord.admission import Submitter

    return Submitter(user_id=str(interaction.user.id), user_name=interaction.user.name)
