"""Slash commands, registered in one place."""

from __future__ import annotations

from discord import app_commands


def register(tree: app_commands.CommandTree, ctx) -> None:
    from services.discord.commands import admin, leaderboard, misc
    from services.discord.commands.common import quiet_tree_errors

    guild = ctx.client.guild_object
    tree.on_error = quiet_tree_errors
    tree.clear_commands(guild=guild)
    for command in (leaderboard.group(ctx), admin.group(ctx), *misc.commands(ctx)):
        tree.add_command(command, guild=guild)
