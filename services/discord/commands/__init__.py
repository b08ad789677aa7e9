"""Slash commands, registered in one place."""

from __future__ import annotations

from discord import app_commands


def register(tree: app_commands.CommandTree, ctx) -> None:
    from services.discord.commands import admin, leaderboard, misc
    from services.discord.commands.common import alias, on_error, quiet_tree_errors

    guild = ctx.client.guild_object
    tree.on_error = quiet_tree_errors
    tree.clear_commands(guild=guild)
    admin_group = admin.group(ctx)
    # upstream's /verify-task is a top-level command; the same one (its admin check included) as /admin verify-task
    verify_task = alias(admin_group.get_command("verify-task"), "verify-task",
                        "Run a problem's solutions/correct and solutions/wrong")
    verify_task.on_error = on_error
    for command in (leaderboard.group(ctx), admin_group, verify_task, *misc.commands(ctx)):
        tree.add_command(command, guild=guild)
