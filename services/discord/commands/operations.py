"""`/admin ...` for running the platform: intake on and off, statistics, the open-data export, the forum posts the
bot keeps, and the commands synced to the server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import discord

from services.core.admin import policy_changes
from services.core.opendata import hf_export
from services.core.presentation import views
from services.core.readmodel import admin_reads, board_reads
from services.discord import forum
from services.discord import repository as bot_repository
from services.discord.commands.common import reply, text_file


async def stop(ctx, interaction: discord.Interaction) -> None:
    await interaction.response.defer(ephemeral=True, thinking=True)  # the wait may pass Discord's 3 s
    await policy_changes.set_intake(ctx.broker, ctx.position, False)
    await reply(interaction, "⏸ Intake stopped: new submissions are refused.")


async def start(ctx, interaction: discord.Interaction) -> None:
    await interaction.response.defer(ephemeral=True, thinking=True)
    await policy_changes.set_intake(ctx.broker, ctx.position, True)
    await reply(interaction, "▶ Intake open.")


async def stats(ctx, interaction: discord.Interaction, last_day_only: bool = False,
                leaderboard: str | None = None) -> None:
    # the gateway's use case (GET /admin/stats, upstream's show-stats): the same figures wherever asked
    board = await board_reads.leaderboard(ctx.pool, leaderboard) if leaderboard else None
    if leaderboard and board is None:
        await reply(interaction, f"❌ Leaderboard `{leaderboard}` does not exist.")
        return
    since = datetime.now(UTC) - timedelta(days=1) if last_day_only else None
    found = views.stats(*await admin_reads.stats(ctx.pool, since, board["id"] if board else None),
                        last_day=last_day_only)
    lines = "\n".join(f"{key} = {value}" for key, value in found.items())
    if len(lines) <= 1900:
        await reply(interaction, f"```\n{lines}\n```")
    else:
        await reply(interaction, f"{len(found)} figures, attached.", files=[text_file("stats.txt", lines)])


async def export_hf(ctx, interaction: discord.Interaction, leaderboards: str, filename: str,
                    private: bool = True, ranked_only: bool = False) -> None:
    await interaction.response.defer(ephemeral=True, thinking=True)
    names = [n.strip() for n in leaderboards.split(",") if n.strip()]
    rows = [await board_reads.leaderboard(ctx.pool, name) for name in names]
    unknown = [name for name, row in zip(names, rows, strict=True) if row is None]
    if unknown or not names:
        await reply(interaction, f"❌ No such leaderboard: {', '.join(unknown) or '(none named)'}")
        return
    try:
        done = await hf_export.export_to_hub(ctx.pool, ctx.settings, [row["id"] for row in rows], filename,
                                             private=private, ranked_only=ranked_only)
    except (hf_export.ExportRefused, hf_export.ExportNotConfigured, hf_export.ExportFailed) as exc:
        await reply(interaction, f"❌ {exc}")
        return
    await reply(interaction, f"✅ Exported {done.rows} submissions to `{done.repo_id}` as `{done.filename}`.")


async def set_forum_ids(ctx, interaction: discord.Interaction) -> None:
    await interaction.response.defer(ephemeral=True, thinking=True)
    layout = ctx.layout
    if not layout.forum_channel:
        await reply(interaction, "❌ This server has no leaderboard forum.")
        return
    found, missing = [], []
    for board in await bot_repository.boards_without_post(ctx.pool):
        thread = await forum.find_post(ctx.client, layout.guild_id, layout.forum_channel, board["name"])
        if thread is None:
            missing.append(board["name"])
            continue
        await bot_repository.store_forum_thread(ctx.pool, board["name"], thread.id, list(board["gpus"]))
        found.append(board["name"])
    text = f"✅ Recorded the forum posts of {len(found)} leaderboards: {', '.join(found) or 'none'}"
    if missing:
        text += f"\nNo post found for: {', '.join(missing)}"
    await reply(interaction, text)


async def resync(ctx, interaction: discord.Interaction) -> None:
    synced = await ctx.client.tree.sync(guild=ctx.client.guild_object)
    await reply(interaction, f"✅ {len(synced)} commands synced.")
