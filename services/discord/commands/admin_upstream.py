"""Upstream KernelBot's `/admin` commands that ours lacked: export-hf, verify-task, set-forum-ids, get-user-names,
update-user-names. Each translates into a use case the platform already has (the open-data export, the submit
path, events the ledger projects); the bot decides nothing itself."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import discord
from discord import app_commands

from schemas.events import LeaderboardCreated, UserRenamed
from services.core.admission import policy
from services.core.infrastructure import settle
from services.core.opendata import hf_export
from services.core.readmodel import board_reads, submission_reads
from services.discord import admission, forum
from services.discord import repository as bot_repository
from services.discord.commands import problem_dirs
from services.discord.commands.common import admin_only, reply, text_file, who
from services.discord.projection import SCRATCH_FORUM_ID
from services.kit.bus import publish

log = logging.getLogger("kernelbot.discord")
VERIFY_WAIT_S = 600.0  # under the interaction token's 15 minutes
VERIFY_MODES = {"test": ["test"], "benchmark": ["benchmark"], "ranked": ["leaderboard"],
                "all": ["test", "benchmark", "leaderboard"]}


def add_commands(admin: app_commands.Group, ctx, *, delete_board) -> None:
    @admin.command(name="export-hf", description="Upload leaderboards' submissions to the Hugging Face Hub")
    @app_commands.describe(leaderboards="comma-separated leaderboard names", filename="file name, ending .parquet",
                           private="to the private data set (default); the public one takes finished boards",
                           ranked_only="only ranked submissions (default: every one, failed ones included)")
    @admin_only()
    async def export_hf(interaction: discord.Interaction, leaderboards: str, filename: str,
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

    @admin.command(name="set-forum-ids", description="Find the forum posts of leaderboards that have none recorded")
    @admin_only()
    async def set_forum_ids(interaction: discord.Interaction) -> None:
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

    @admin.command(name="get-user-names", description="The names the platform shows for users, as a JSON file")
    @admin_only()
    async def get_user_names(interaction: discord.Interaction) -> None:
        names = await bot_repository.user_names(ctx.pool)
        await reply(interaction, f"{len(names)} user names; edit and give back with `/admin update-user-names`.",
                    files=[text_file("user_names.json", json.dumps(names, indent=2, ensure_ascii=False))])

    @admin.command(name="update-user-names", description="Rename users from a JSON file of user id -> name")
    @app_commands.describe(attachment="a JSON object mapping user ids to names")
    @admin_only()
    async def update_user_names(interaction: discord.Interaction, attachment: discord.Attachment) -> None:
        try:
            mapping = json.loads(await attachment.read())
        except (UnicodeDecodeError, json.JSONDecodeError):
            mapping = None
        if not isinstance(mapping, dict) or not all(
                isinstance(k, str) and isinstance(v, str) and v.strip() and len(v) <= 100 for k, v in mapping.items()):
            await reply(interaction, "❌ Attach a JSON object mapping user ids to names (1 to 100 characters).")
            return
        known = await bot_repository.user_names(ctx.pool)
        changes = {user_id: name.strip() for user_id, name in mapping.items() if known.get(user_id) != name.strip()}
        unknown = [user_id for user_id in changes if user_id not in known]
        for user_id in unknown:
            del changes[user_id]
        tag = uuid.uuid4().hex
        for user_id, name in changes.items():
            await publish(ctx.broker, UserRenamed(user_id=user_id, user_name=name, change_id=tag))
        text = f"✅ Renamed {len(changes)} users."
        if unknown:
            text += f" Unknown user ids left alone: {', '.join(unknown[:20])}"
        await reply(interaction, text)

    @admin.command(name="verify-task", description="Run a problem's solutions/correct and solutions/wrong")
    @app_commands.describe(directory="problem directory under the problems root", gpu="GPU (default: the task's first)",
                           mode="which runs (default: ranked)")
    @app_commands.choices(mode=[app_commands.Choice(name=m, value=m) for m in VERIFY_MODES])
    @app_commands.autocomplete(directory=problem_dirs.autocomplete(ctx))
    @admin_only()
    async def verify_task(interaction: discord.Interaction, directory: str, gpu: str | None = None,
                          mode: str = "ranked") -> None:
        loaded = await problem_dirs.load_or_reply(ctx, interaction, directory)
        if loaded is None:
            return
        root, path, problem = loaded
        solutions = sorted(p for p in path.glob("solutions/*/*") if p.parent.name in ("correct", "wrong")
                           and p.is_file())
        if not solutions:
            await reply(interaction, f"❌ `{directory}` has no solutions/correct or solutions/wrong files.")
            return
        await interaction.response.defer(ephemeral=True, thinking=True)
        gpu = gpu or problem.gpus[0]
        name = f"verify-{path.name}-{secrets.token_hex(3)}".lower()
        created = LeaderboardCreated(
            event_id=f"LeaderboardCreated:{name}", name=name, description=problem.description, task=problem.task,
            task_hash=problem.task_hash, templates=problem.templates, gpus=[gpu],
            deadline=datetime.now(UTC) + timedelta(days=1), secret_seed=secrets.randbits(31),
            creator_id=interaction.user.id, forum_id=SCRATCH_FORUM_ID)
        try:
            board = await _created(ctx, created)
            report = await _verify(ctx, interaction, board["name"], gpu, VERIFY_MODES[mode], root, solutions)
        finally:
            board = await board_reads.leaderboard(ctx.pool, name)
            if board is not None:
                await delete_board(board, force=True)
        await reply(interaction, f"**verify-task `{directory}` on {gpu}**\n```\n" + "\n".join(report) + "\n```")


async def _created(ctx, created: LeaderboardCreated, timeout_s: float = 30.0):
    """Publish the scratch board and wait until the ledger has projected it."""
    await settle.publish_and_settle(ctx.broker, created, ctx.position, timeout_s)
    row = await board_reads.leaderboard(ctx.pool, created.name)
    if row is None:
        raise TimeoutError(f"the board {created.name} did not appear")
    return row


async def _verify(ctx, interaction, board: str, gpu: str, modes: list[str], root: Path,
                  solutions: list[Path]) -> list[str]:
    """Submit every solution in every mode, wait for the outcomes, and say which behaved as their folder says."""
    submitted: dict[int, tuple[str, str, bool]] = {}  # submission id -> (solution, mode, expected to pass)
    report: list[str] = []
    for solution in solutions:
        label = f"{solution.parent.name}/{solution.name}"
        script = admission.Script(file_name=solution.name, content=solution.read_bytes())
        for mode in modes:
            try:
                admitted, board_name = await admission.judge(ctx.pool, who(interaction), board, [gpu], mode, script)
            except policy.Refused as refused:
                report.append(f"❌ {label:28} {mode}: refused: {refused.refusal.detail}")
                continue
            submission_id = await submission_reads.next_submission_id(ctx.pool)
            await admission.record(ctx.broker, submission_id, who(interaction), board_name, [gpu], admitted)
            submitted[submission_id] = (label, mode, solution.parent.name == "correct")
    deadline = asyncio.get_running_loop().time() + VERIFY_WAIT_S
    pending = dict(submitted)
    while pending and asyncio.get_running_loop().time() < deadline:
        for submission_id, (label, mode, should_pass) in list(pending.items()):
            row = await submission_reads.submission(ctx.pool, submission_id)
            if row is None or not (row["done"] or row["status"] == "rejected"):
                continue
            del pending[submission_id]
            runs = await submission_reads.submission_runs(ctx.pool, submission_id)
            passed = row["job_status"] == "succeeded" and bool(runs) and all(r["passed"] for r in runs)
            verdict = "passed" if passed else "failed"
            if passed == should_pass:
                report.append(f"✅ {label:28} {mode}: {verdict}, as expected")
            else:
                report.append(f"❌ {label:28} {mode}: {verdict}, expected it to {'pass' if should_pass else 'fail'}")
        if pending:
            await asyncio.sleep(0.5)
    report.extend(f"❌ {label:28} {mode}: no outcome in time" for label, mode, _ in pending.values())
    return sorted(report, key=lambda line: line[2:])
