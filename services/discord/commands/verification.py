"""Is the platform working? `/ping`; `/verifydb`, a database round trip; `/verifyruns`, a known solution on a
leaderboard's GPUs; and `/admin verify-task` (also `/verify-task`, upstream's name), a problem's
solutions/correct and solutions/wrong run on a scratch leaderboard, each expected to pass or fail as its folder
says. The runs go through the submit use case (services.core.submission.submit), as any submission does."""

from __future__ import annotations

import asyncio
import math
import secrets
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import discord

from problems import PROBLEMS_ROOT
from schemas.events import LeaderboardCreated
from services.core.admission import policy
from services.core.infrastructure import settle
from services.core.readmodel import board_reads, submission_reads
from services.discord import admission, repository
from services.discord.commands import problem_dirs
from services.discord.commands.boards import delete_board
from services.discord.commands.common import refusal_text, reply
from services.discord.commands.submit import record
from services.discord.projection import SCRATCH_FORUM_ID
from services.kit.bus import publish

KNOWN_SOLUTION = PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py"
VERIFY_WAIT_S = 600.0  # under the interaction token's 15 minutes
VERIFY_MODES = {"test": ["test"], "benchmark": ["benchmark"], "ranked": ["leaderboard"],
                "all": ["test", "benchmark", "leaderboard"]}


async def ping(ctx, interaction: discord.Interaction) -> None:
    latency = ctx.client.latency  # NaN until the gateway has answered a heartbeat
    await reply(interaction, "pong" if math.isnan(latency) else f"pong ({latency * 1000:.0f} ms)")


async def verifydb(ctx, interaction: discord.Interaction) -> None:
    started = time.perf_counter()
    value = await repository.round_trip(ctx.pool)
    ok = value == "kernelbot"
    await reply(interaction, f"{'✅' if ok else '❌'} database round trip in "
                             f"{(time.perf_counter() - started) * 1000:.1f} ms")


async def verifyruns(ctx, interaction: discord.Interaction, leaderboard: str = "identity_py") -> None:
    await interaction.response.defer(ephemeral=True, thinking=True)
    gpus = await admission.board_gpus(ctx.pool, leaderboard)
    script = admission.Script(file_name="submission.py", content=KNOWN_SOLUTION.read_bytes())
    try:
        admitted = await admission.admit(ctx.pool, interaction.user, leaderboard, gpus, "test", script)
    except policy.Refused as refused:
        await interaction.edit_original_response(content=refusal_text(refused))
        return
    await record(ctx, interaction, admitted)


async def verify_task(ctx, interaction: discord.Interaction, directory: str, gpu: str | None = None,
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
        creator_id=interaction.user.id, forum_id=SCRATCH_FORUM_ID, practice=True)
    try:
        board = await _created(ctx, created)
        report = await _verify(ctx, interaction, board["name"], gpu, VERIFY_MODES[mode], root, solutions)
    finally:
        board = await board_reads.leaderboard(ctx.pool, name)
        if board is not None:
            await delete_board(ctx, board, force=True)
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
                admitted = await admission.admit(ctx.pool, interaction.user, board, [gpu], mode, script)
            except policy.Refused as refused:
                report.append(f"❌ {label:28} {mode}: refused: {refused.refusal.detail}")
                continue
            submission_id = await submission_reads.next_submission_id(ctx.pool)
            await publish(ctx.broker, admitted.received(submission_id))
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
