"""How a row of the command table (services/discord/commands/table.py) becomes a discord.py slash command.

A handler is a module-level coroutine `handler(ctx, interaction, <options>)`. discord.py reads a command's options
from its callback's signature, so the callback made here shows the handler's signature without `ctx` and without the
arguments the row fixes (submit's `mode`), and calls the handler with both.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import discord
from discord import app_commands

from services.discord.commands.common import on_error

Handler = Callable[..., Awaitable[None]]
Check = Callable[[], Callable[[Any], Any]]  # admin_only and the like: a factory of an app_commands.check decorator
Completer = Callable[[discord.Interaction, str], Coroutine[Any, Any, list[app_commands.Choice[str]]]]
Autocomplete = Callable[[Any], Completer]  # ctx -> the option's completer


@dataclass(frozen=True)
class Slash:
    """One slash command: its path (`admin ban`, `ping`), what Discord shows, and the handler that answers it."""

    path: str
    description: str
    handler: Handler
    options: Mapping[str, str] = field(default_factory=dict)  # option -> its description in Discord
    checks: Sequence[Check] = ()  # run in this order before the handler
    autocomplete: Mapping[str, Autocomplete] = field(default_factory=dict)
    choices: Mapping[str, Sequence[str]] = field(default_factory=dict)
    fixed: Mapping[str, Any] = field(default_factory=dict)  # handler arguments set by the row, not by the user

    @property
    def group_path(self) -> str:
        return self.path.rpartition(" ")[0]

    @property
    def name(self) -> str:
        return self.path.rpartition(" ")[2]


def alias(row: Slash, path: str, description: str) -> Slash:
    """The same command under another name (upstream KernelBot's): its handler, options and checks."""
    return dataclasses.replace(row, path=path, description=description)


def callback(row: Slash, ctx) -> Callable[..., Awaitable[None]]:
    """The coroutine discord.py calls: the handler's signature less `ctx` and the fixed arguments, annotations
    resolved here because discord.py would resolve them against this module's globals."""
    handler, fixed = row.handler, dict(row.fixed)
    hints = typing.get_type_hints(handler)
    signature = inspect.signature(handler)
    shown = [parameter.replace(annotation=hints.get(name, parameter.annotation))
             for name, parameter in list(signature.parameters.items())[1:] if name not in fixed]

    async def call(interaction: discord.Interaction, **options: Any) -> None:
        await handler(ctx, interaction, **options, **fixed)

    call.__signature__ = signature.replace(parameters=shown)  # type: ignore[attr-defined]
    call.__name__ = call.__qualname__ = handler.__name__  # a bare name: discord.py would take a dotted one for a method
    return call


def command(row: Slash, ctx) -> app_commands.Command:
    call: Any = callback(row, ctx)
    for check in row.checks:  # appended in turn: discord.py runs them in this order
        call = check()(call)
    if row.options:
        call = app_commands.describe(**row.options)(call)
    if row.autocomplete:
        call = app_commands.autocomplete(**{name: make(ctx) for name, make in row.autocomplete.items()})(call)
    if row.choices:
        call = app_commands.choices(**{name: [app_commands.Choice(name=value, value=value) for value in values]
                                       for name, values in row.choices.items()})(call)
    return app_commands.Command(name=row.name, description=row.description, callback=call)


def build(rows: Sequence[Slash], groups: Mapping[str, str], ctx) -> list[app_commands.Command | app_commands.Group]:
    """The top-level commands and groups of the table, in its order. Only a top-level command or group answers a
    failure (common.on_error): discord.py calls the handlers of a command's parents too, so one more would reply
    twice."""
    made: dict[str, app_commands.Group] = {}
    top: list[app_commands.Command | app_commands.Group] = []

    def group(path: str) -> app_commands.Group:
        if path not in made:
            parent_path, _, name = path.rpartition(" ")
            parent = group(parent_path) if parent_path else None
            made[path] = app_commands.Group(name=name, description=groups[path])
            if parent is not None:
                parent.add_command(made[path])
            else:
                made[path].on_error = on_error  # type: ignore[method-assign]
                top.append(made[path])
        return made[path]

    for row in rows:
        built = command(row, ctx)
        if row.group_path:
            group(row.group_path).add_command(built)
        else:
            built.on_error = on_error
            top.append(built)
    return top
