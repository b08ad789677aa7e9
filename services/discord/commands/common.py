"""What the commands share: replies, who may run what, leaderboard autocomplete."""

from __future__ import annotations

import io
import logging

import discord
from discord import app_commands

from services.core.admission import policy
from services.core.readmodel import board_reads
from services.discord import repository
from services.discord.layout import ADMIN_ROLE, CREATOR_ROLE

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


def has_role(interaction: discord.Interaction, name: str) -> bool:
    """Holds the role of that name the bot found or created at start-up, by id: another role given the same name
    by someone who may manage roles does not count."""
    layout = interaction.client.ctx.layout
    role_id = (layout.roles or {}).get(name) if layout else None
    roles = getattr(interaction.user, "roles", None) or []  # a DM's user has none
    return role_id is not None and any(role.id == role_id for role in roles)


def is_admin(interaction: discord.Interaction) -> bool:
    return has_role(interaction, ADMIN_ROLE)


def admin_only():
    """Every admin command checks the Leaderboard Admin role, whatever Discord's command permissions say."""
    async def predicate(interaction: discord.Interaction) -> bool:
        if not is_admin(interaction):
            raise app_commands.CheckFailure(f"This command needs the {ADMIN_ROLE} role.")
        return True

    return app_commands.check(predicate)


def admin_or_creator():
    """Leaderboard Admins, and Leaderboard Creators (whose command then checks the board is theirs)."""
    async def predicate(interaction: discord.Interaction) -> bool:
        if not (is_admin(interaction) or has_role(interaction, CREATOR_ROLE)):
            raise app_commands.CheckFailure(f"This command needs the {ADMIN_ROLE} or the {CREATOR_ROLE} role.")
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


async def public_board_named(ctx, interaction: discord.Interaction):
    """The public leaderboard the same command's `leaderboard` option names, for completing its other options."""
    name = getattr(interaction.namespace, "leaderboard", None)
    row = await board_reads.leaderboard(ctx.pool, name) if name else None
    return row if row is not None and row["visibility"] == "public" else None


def gpu_autocomplete(ctx):
    """The GPUs of the leaderboard named in the same command (its `leaderboard` option)."""
    async def complete(interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        row = await public_board_named(ctx, interaction)
        if row is None:
            return []
        # a comma list (submit's gpu option) completes its last item
        done, _, last = current.rpartition(",")
        prefix = f"{done}," if done else ""
        return [app_commands.Choice(name=prefix + gpu, value=prefix + gpu) for gpu in sorted(row["gpus"])
                if last.strip().lower() in gpu.lower()][:MAX_CHOICES]

    return complete

