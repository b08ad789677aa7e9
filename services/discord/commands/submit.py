"""`/leaderboard submit test|benchmark|profile|ranked`: judge with the shared policy, record, reply live."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import discord
from discord import app_commands

from services.core.admission import policy
from services.core.readmodel import submission_reads
from services.discord import admission, repository, texts
from services.discord.commands.common import board_autocomplete, gpu_autocomplete, refusal_text, reply, who
from services.kit.bus import PublishFailed

log = logging.getLogger("kernelbot.discord")
GPU_CHOICE_TIMEOUT_S = 120.0


class GpuChoice(discord.ui.View):
    """A multi-select of a leaderboard's GPUs, answered only by the person who submits."""

    def __init__(self, user_id: int, gpus: list[str]) -> None:
        super().__init__(timeout=GPU_CHOICE_TIMEOUT_S)
        self.user_id = user_id
        self.chosen: list[str] = []
        select = discord.ui.Select(placeholder="Choose the GPUs to run on", min_values=1, max_values=len(gpus),
                                   options=[discord.SelectOption(label=gpu, value=gpu) for gpu in gpus])
        select.callback = self._chosen
        self.add_item(select)
        self.select = select

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        return interaction.user.id == self.user_id

    async def _chosen(self, interaction: discord.Interaction) -> None:
        self.chosen = list(self.select.values)
        await interaction.response.edit_message(content=f"Submitting on {', '.join(self.chosen)} …", view=None)
        self.stop()


async def submit(ctx, interaction: discord.Interaction, mode: str, script: discord.Attachment,
                 leaderboard: str | None, gpu: str | None) -> None:
    if interaction.channel_id != ctx.layout.submissions_channel:
        await reply(interaction, f"Submissions go to <#{ctx.layout.submissions_channel}>.")
        return
    await interaction.response.defer(ephemeral=True, thinking=True)
    source = admission.Script(file_name=script.filename, content=await script.read())
    try:
        board = admission.requested_board(leaderboard, source)
        gpus = admission.requested_gpus(gpu, source)
    except policy.Refused as refused:
        await interaction.edit_original_response(content=refusal_text(refused))
        return
    if board is None:
        await interaction.edit_original_response(
            content="❌ Name a leaderboard: the `leaderboard` option or a `#!POPCORN leaderboard <name>` header.")
        return
    if not gpus:
        available = await admission.board_gpus(ctx.pool, board)
        if len(available) == 1:
            gpus = available
        elif len(available) > 1:
            gpus = await _ask_gpus(interaction, board, available)
            if not gpus:
                return
    who_ = who(interaction)
    try:
        admitted, board_name = await admission.judge(ctx.pool, who_, board, gpus, admission.MODES[mode], source)
    except policy.Refused as refused:
        await interaction.edit_original_response(content=refusal_text(refused))
        return
    await _record(ctx, interaction, who_, board_name, gpus, admitted)


async def _ask_gpus(interaction: discord.Interaction, board: str, gpus: list[str]) -> list[str]:
    choice = GpuChoice(interaction.user.id, gpus)
    await interaction.edit_original_response(content=f"`{board}` runs on several GPUs; which ones?", view=choice)
    if await choice.wait():  # timed out
        await interaction.edit_original_response(content="No GPU chosen; nothing was submitted.", view=None)
        return []
    return choice.chosen


async def _record(ctx, interaction: discord.Interaction, who_, board_name: str, gpus: list[str],
                  admitted: policy.Admitted) -> None:
    submission_id = await submission_reads.next_submission_id(ctx.pool)
    original = await interaction.original_response()
    # Stored before the event exists, so its first update already finds where to write.
    async with ctx.pool.acquire() as conn:
        await repository.track_submission(
            conn, submission_id=submission_id, user_id=who_.user_id, user_name=who_.user_name,
            leaderboard=board_name, mode=admitted.mode, gpus=gpus, channel_id=interaction.channel_id,
            application_id=interaction.application_id, token=interaction.token,
            issued_at=interaction.created_at.astimezone(UTC) if interaction.created_at else datetime.now(UTC),
            message_id=original.id)
    head = texts.header(submission_id, board_name, admitted.mode, gpus)
    await interaction.edit_original_response(content=f"{head}\n⏳ queued", view=None)
    try:
        await admission.record(ctx.broker, submission_id, who_, board_name, gpus, admitted)
    except PublishFailed:
        log.exception("submission %s was not recorded", submission_id)
        await interaction.edit_original_response(content=f"{head}\n❌ The platform did not record the submission; "
                                                         "please try again.")


def submit_group(ctx) -> app_commands.Group:
    group = app_commands.Group(name="submit", description="Submit a kernel")

    def make(mode: str, description: str) -> app_commands.Command:
        @app_commands.command(name=mode, description=description)
        @app_commands.describe(script="Your kernel (.py, .cu, .cuh, .cpp)",
                               leaderboard="Leaderboard (default: the #!POPCORN leaderboard header)",
                               gpu="GPU, or a comma-separated list (default: header, or you choose)")
        @app_commands.autocomplete(leaderboard=board_autocomplete(ctx), gpu=gpu_autocomplete(ctx))
        async def command(interaction: discord.Interaction, script: discord.Attachment,
                          leaderboard: str | None = None, gpu: str | None = None) -> None:
            await submit(ctx, interaction, mode, script, leaderboard, gpu)

        return command

    for mode, description in (("test", "Check your kernel against the tests"),
                              ("benchmark", "Time your kernel on the benchmarks"),
                              ("profile", "Profile your kernel"),
                              ("ranked", "A ranked run: tests, benchmarks and the leaderboard")):
        group.add_command(make(mode, description))
    return group
