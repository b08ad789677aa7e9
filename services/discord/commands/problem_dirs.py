"""A problem directory under the bot's problems root, as `/admin create-dev-leaderboard`, `verify-task` and
`update-problems` name one: the one place that resolves it, refuses an escape, loads its task.yml and says why not."""

from __future__ import annotations

from pathlib import Path

import discord

from problems import PROBLEMS_ROOT
from runner.task.taskfile import LoadedProblem, TaskFileError, load_problem
from services.discord.commands.common import MAX_CHOICES, reply

SEARCH_DEPTH = 3  # problem directories sit at most this deep under the root (examples/<name>, <set>/<name>)


def problems_root(ctx) -> Path:
    return Path(ctx.settings.problems_dir or PROBLEMS_ROOT).resolve()


def inside(root: Path, relative: str) -> Path | None:
    """A directory under the problems root; None for anything that escapes it."""
    path = (root / relative).resolve()
    return path if path.is_relative_to(root) and path.exists() else None


async def load_or_reply(ctx, interaction: discord.Interaction,
                        directory: str) -> tuple[Path, Path, LoadedProblem] | None:
    """(root, path, problem) of `directory`; None once the admin has been told why it cannot be loaded."""
    root = problems_root(ctx)
    path = inside(root, directory)
    if path is None:
        await reply(interaction, f"❌ No problem directory `{directory}` under the problems root.")
        return None
    try:
        return root, path, load_problem(path, root=root)
    except (TaskFileError, OSError) as exc:
        await reply(interaction, f"❌ {exc}")
        return None


def problem_directories(root: Path) -> list[str]:
    """Every directory holding a task.yml under the root, as the relative path the commands take."""
    found = []
    for depth in range(1, SEARCH_DEPTH + 1):
        for task in root.glob("/".join(["*"] * depth) + "/task.yml"):
            found.append(task.parent.relative_to(root).as_posix())
    return sorted(found)


def autocomplete(ctx):
    """The `directory` option's choices: the problem directories whose path contains what was typed."""
    async def complete(_interaction: discord.Interaction, current: str) -> list[discord.app_commands.Choice[str]]:
        matching = [d for d in problem_directories(problems_root(ctx)) if current.lower() in d.lower()]
        return [discord.app_commands.Choice(name=d, value=d) for d in matching[:MAX_CHOICES]]

    return complete
