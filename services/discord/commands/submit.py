"""`/leaderboard submit test|benchmark|profile|ranked`: the submit use case (services.core.submission.submit), recorded
and answered with a live message."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import discord

from services.core.admission import policy
from services.core.readmodel import submission_reads
from services.core.submission import submit as submit_case
from services.discord import admission, repository, texts
from services.discord.commands.common import refusal_text, reply
from services.kit.bus import PublishFailed, publish

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


async def submit(ctx, interaction: discord.Interaction, script: discord.Attachment, leaderboard: str | None = None,
                 gpu: str | None = None, *, mode: str) -> None:
    """`/leaderboard submit <mode>`: the board and GPUs from the options or the script's header, then the submit use
    case; the GPUs are asked for when neither names them and the board has several."""
    if interaction.channel_id != ctx.layout.submissions_channel:
        await reply(interaction, f"Submissions go to <#{ctx.layout.submissions_channel}>.")
        return
    await interaction.response.defer(ephemeral=True, thinking=True)
    # Discord says how large the file is: a file past the limit is refused without downloading it (up to 25 MB
    # and more, as many at once as people submit).
    if script.size > policy.MAX_SUBMISSION_BYTES:
        await interaction.edit_original_response(content=f"❌ {policy.TOO_LARGE}")
        return
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
    try:
        admitted = await admission.admit(ctx.pool, interaction.user, board, gpus, admission.MODES[mode], source,
                                         ctx.submit_rate)
    except policy.Refused as refused:
        await interaction.edit_original_response(content=refusal_text(refused))
        return
    await record(ctx, interaction, admitted)


async def _ask_gpus(interaction: discord.Interaction, board: str, gpus: list[str]) -> list[str]:
    choice = GpuChoice(interaction.user.id, gpus)
    await interaction.edit_original_response(content=f"`{board}` runs on several GPUs; which ones?", view=choice)
    if await choice.wait():  # timed out
        await interaction.edit_original_response(content="No GPU chosen; nothing was submitted.", view=None)
        return []
    return choice.chosen


async def record(ctx, interaction: discord.Interaction, admitted: submit_case.Admission) -> None:
    """Record an admitted submission and make the interaction's answer its live message."""
    submission_id = await submission_reads.next_submission_id(ctx.pool)
    original = await interaction.original_response()
    who, gpus, mode = admitted.submitter, list(admitted.entry.gpus), admitted.admitted.mode
    # Stored before the event exists, so its first update already finds where to write.
    async with ctx.pool.acquire() as conn:
        await repository.track_submission(
            conn, submission_id=submission_id, user_id=who.user_id, user_name=who.user_name,
            leaderboard=admitted.board_name, mode=mode, gpus=gpus, channel_id=interaction.channel_id,
            application_id=interaction.application_id, token=interaction.token,
            issued_at=interaction.created_at.astimezone(UTC) if interaction.created_at else datetime.now(UTC),
            message_id=original.id)
    head = texts.header(submission_id, admitted.board_name, mode, gpus)
    await interaction.edit_original_response(content=f"{head}\n⏳ queued", view=None)
    try:
        await publish(ctx.broker, admitted.received(submission_id))
    except PublishFailed:
        log.exception("submission %s was not recorded", submission_id)
        await interaction.edit_original_response(content=f"{head}\n❌ The platform did not record the submission; "
                                                         "please try again.")
