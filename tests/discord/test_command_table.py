"""The command table (services/discord/commands/table.py) and how its rows become discord.py commands. No platform:
what Discord is sent at sync, and what a handler is called with."""

from __future__ import annotations

from types import SimpleNamespace

import discord
from discord import app_commands

from services.discord.commands import table
from services.discord.commands.registry import Slash, build

# Every command Discord lists, with its options in order (`?`: optional). Users and upstream's habits rely on these.
SYNCED = {
    "leaderboard submit test": ["script", "leaderboard?", "gpu?"],
    "leaderboard submit benchmark": ["script", "leaderboard?", "gpu?"],
    "leaderboard submit profile": ["script", "leaderboard?", "gpu?"],
    "leaderboard submit ranked": ["script", "leaderboard?", "gpu?"],
    "leaderboard list": [],
    "leaderboard show": ["leaderboard", "gpu?"],
    "leaderboard show-personal": ["leaderboard"],
    "leaderboard task": ["leaderboard"],
    "leaderboard template": ["leaderboard", "language?"],
    "leaderboard get-submission": ["submission_id"],
    "leaderboard help": [],
    "admin create-dev-leaderboard": ["directory", "gpu?", "closed?"],
    "admin create-local": ["directory", "gpu?", "closed?"],
    "admin delete-leaderboard": ["leaderboard", "confirm_name", "force?"],
    "admin delete-submission": ["submission_id"],
    "admin stop": [],
    "admin start": [],
    "admin update-problems": ["repository?", "branch?", "problem_set?", "force?", "closed?"],
    "admin stats": ["last_day_only?", "leaderboard?"],
    "admin show-stats": ["last_day_only?", "leaderboard?"],
    "admin export-hf": ["leaderboards", "filename", "private?", "ranked_only?"],
    "admin set-forum-ids": [],
    "admin get-user-names": [],
    "admin update-user-names": ["attachment"],
    "admin verify-task": ["directory", "gpu?", "mode?"],
    "admin ban": ["user?", "user_id?"],
    "admin unban": ["user?", "user_id?"],
    "admin clear-hold": ["submission_id", "reason?"],
    "admin get-submission": ["submission_id"],
    "admin resync": [],
    "verify-task": ["directory", "gpu?", "mode?"],
    "ping": [],
    "verifydb": [],
    "verifyruns": ["leaderboard?"],
}
UNCHECKED = {path for path in SYNCED if path.startswith("leaderboard ")} | {"ping"}


def context() -> SimpleNamespace:
    return SimpleNamespace(client=SimpleNamespace(guild_object=discord.Object(1)), pool=None,
                           settings=SimpleNamespace(problems_dir=None))


def leaves(command, prefix: str = ""):
    path = f"{prefix} {command.name}".strip()
    if isinstance(command, app_commands.Group):
        for child in command.commands:
            yield from leaves(child, path)
    else:
        yield path, command


async def test_the_table_syncs_every_command_with_its_options_in_order():
    tree = app_commands.CommandTree(discord.Client(intents=discord.Intents(guilds=True)))
    synced = {}
    for top in build(table.COMMANDS, table.GROUPS, context()):
        payload = top.to_dict(tree)
        for path, command in leaves(top):
            synced[path] = [f"{p.name}{'' if p.required else '?'}" for p in command.parameters]
        assert payload["name"] == top.name
    assert list(synced.items()) == list(SYNCED.items())


async def test_every_admin_command_checks_a_role_and_only_the_top_level_answers_a_failure():
    tops = build(table.COMMANDS, table.GROUPS, context())
    for top in tops:
        assert "on_error" in vars(top), top.name
        for path, command in leaves(top):
            assert bool(command.checks) == (path not in UNCHECKED), path
            # discord.py calls every parent's handler too: a second one would answer the user twice
            assert ("on_error" in vars(command) and command.on_error is not None) == (command is top), path
    submit = next(t for t in tops if t.name == "leaderboard").get_command("submit")
    assert "on_error" not in vars(submit)


async def test_a_row_shows_its_handlers_options_and_calls_it_with_the_context_and_the_fixed_arguments():
    calls = []

    async def measure(ctx, interaction: discord.Interaction, size: int, label: str | None = None, *,
                      unit: str) -> None:
        calls.append((ctx, interaction, size, label, unit))

    row = Slash("tools measure", "Measure", measure, {"size": "how big"}, fixed={"unit": "cm"})
    ctx, interaction = context(), object()
    (group,) = build([row], {"tools": "Tools"}, ctx)
    command = group.get_command("measure")
    assert [(p.name, p.type, p.required, p.description) for p in command.parameters] == [
        ("size", discord.AppCommandOptionType.integer, True, "how big"),
        ("label", discord.AppCommandOptionType.string, False, "…")]
    await command.callback(interaction, size=3)
    assert calls == [(ctx, interaction, 3, None, "cm")]
