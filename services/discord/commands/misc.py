"""`/ping`, and the operators' checks `/verifydb` and `/verifyruns` (Leaderboard Admin only)."""

from __future__ import annotations

import math
import time

import discord
from discord import app_commands

from problems import PROBLEMS_ROOT
from services.core.admission import policy
from services.discord import admission, repository
from services.discord.commands.common import admin_only, on_error, refusal_text, reply, who
from services.discord.commands.submit import _record

KNOWN_SOLUTION = PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py"


def commands(ctx) -> list[app_commands.Command]:
    @app_commands.command(name="ping", description="Is the bot alive?")
    async def ping(interaction: discord.Interaction) -> None:
        latency = ctx.client.latency  # NaN until the gateway has answered a heartbeat
        await reply(interaction, "pong" if math.isnan(latency) else f"pong ({latency * 1000:.0f} ms)")

    @app_commands.command(name="verifydb", description="A write and a read through the database")
    @admin_only()
    async def verifydb(interaction: discord.Interaction) -> None:
        started = time.perf_counter()
        value = await repository.round_trip(ctx.pool)
        ok = value == "kernelbot"
        await reply(interaction, f"{'✅' if ok else '❌'} database round trip in "
                                 f"{(time.perf_counter() - started) * 1000:.1f} ms")

    @app_commands.command(name="verifyruns", description="Run a known solution on every GPU of a leaderboard")
    @admin_only()
    async def verifyruns(interaction: discord.Interaction, leaderboard: str = "identity_py") -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        gpus = await admission.board_gpus(ctx.pool, leaderboard)
        script = admission.Script(file_name="submission.py", content=KNOWN_SOLUTION.read_bytes())
        try:
            admitted, name = await admission.judge(ctx.pool, who(interaction), leaderboard, gpus, "test", script)
        except policy.Refused as refused:
            await interaction.edit_original_response(content=refusal_text(refused))
            return
        await _record(ctx, interaction, who(interaction), name, gpus, admitted)

    for command in (ping, verifydb, verifyruns):
        command.on_error = on_error
    return [ping, verifydb, verifyruns]
