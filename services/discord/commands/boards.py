"""`/admin ...` for leaderboards: create a dev leaderboard from a problem directory, sync leaderboards from a problem
repository, delete one. Each change is published as the event the rest of the platform already knows and answered
once the read model shows it."""

from __future__ import annotations

from datetime import UTC, datetime

import discord

from services.core.admin import dev_boards
from services.core.infrastructure import settle
from services.core.problems import apply
from services.core.problems import archive as problem_archive
from services.core.problems import repository as problems_repository
from services.core.problems.sync import ProblemSetNotFound, name_problem
from services.core.readmodel import board_reads
from services.discord.commands import problem_dirs
from services.discord.commands.common import is_admin, reply


async def sync_problems(ctx, repository: str | None, branch: str, problem_set: str | None, force: bool,
                        closed: bool = False):
    """The shared problem sync (services.core.problems.apply) of a repository's branch archive; no repository
    named: KB_PROBLEMS_REPOSITORY (reference-kernels unless configured), as upstream's PROBLEMS_REPO."""
    options = {"problem_set": problem_set, "force": force, "visibility": "closed" if closed else "public"}
    repository = repository or ctx.settings.problems_repository
    if not problem_archive.REPOSITORY.match(repository) or not branch or "/" in branch:
        raise ValueError("repository must be <owner>/<name>, and the branch a name without slashes")
    data = await problem_archive.download(
        problem_archive.archive_url(ctx.settings.problems_archive_url, repository, branch))
    return await apply.plan_archive(ctx.pool, data, **options)


async def delete_board(ctx, row, *, force: bool) -> None:
    """As the gateway's admin route does: the live submissions first, then the board, under a fresh tag."""
    events = await dev_boards.deletion_events(ctx.pool, row, force=force)
    await settle.publish_and_settle(ctx.broker, events, ctx.position, settle.PROJECTION_WAIT_S)


async def create_dev_leaderboard(ctx, interaction: discord.Interaction, directory: str, gpu: str | None = None,
                                 closed: bool = False) -> None:
    loaded = await problem_dirs.load_or_reply(ctx, interaction, directory)
    if loaded is None:
        return
    _, path, problem = loaded
    name = dev_boards.dev_board_name(path.name)
    gpus = [g.strip() for g in gpu.split(",") if g.strip()] if gpu else problem.gpus
    refusal = name_problem(name) or ("" if gpus else "no GPUs: name some, or list them in task.yml")
    if refusal:
        await reply(interaction, f"❌ {refusal}")
        return
    events, _ = await dev_boards.dev_board_events(ctx.pool, name, problem, gpus=gpus, now=datetime.now(UTC),
                                                  creator_id=interaction.user.id,
                                                  visibility="closed" if closed else "public")
    await settle.publish_and_settle(ctx.broker, events, ctx.position, settle.PROJECTION_WAIT_S)
    await reply(interaction, f"✅ Created `{name}`{' (closed)' if closed else ''}.")


async def delete_leaderboard(ctx, interaction: discord.Interaction, leaderboard: str, confirm_name: str,
                             force: bool = False) -> None:
    row = await board_reads.leaderboard(ctx.pool, leaderboard)
    if row is None:
        await reply(interaction, f"❌ Leaderboard `{leaderboard}` does not exist.")
        return
    if not is_admin(interaction) and int(row["creator_id"]) != interaction.user.id:
        await reply(interaction, "⛔ A Leaderboard Creator may delete only the leaderboards they created.")
        return
    if confirm_name != row["name"]:
        await reply(interaction, f"❌ Type the leaderboard's name, `{row['name']}`, to confirm.")
        return
    live = await problems_repository.live_submissions(ctx.pool, row["name"])
    if live and not force:
        await reply(interaction, f"❌ `{row['name']}` has {len(live)} submissions; pass `force` to delete them too.")
        return
    await delete_board(ctx, row, force=force)
    await reply(interaction, f"✅ Deleted `{row['name']}`" + (f" and {len(live)} submissions." if live else "."))


async def update_problems(ctx, interaction: discord.Interaction, repository: str | None = None, branch: str = "main",
                          problem_set: str | None = None, force: bool = False, closed: bool = False) -> None:
    await interaction.response.defer(ephemeral=True, thinking=True)
    try:
        plan = await sync_problems(ctx, repository, branch, problem_set, force, closed)
    except (problem_archive.ArchiveError, ProblemSetNotFound, ValueError) as exc:
        await reply(interaction, f"❌ {exc}")
        return
    await apply.publish_plan(ctx.broker, plan, ctx.position, settle.PROJECTION_WAIT_S)
    report = plan.report()
    errors = "".join(f"\n❌ {e['name']}: {e['error']}" for e in report["errors"])
    await reply(interaction, f"✅ created {len(report['created'])}, updated {len(report['updated'])}, skipped "
                             f"{len(report['skipped'])}: {', '.join(report['created'] + report['updated'])}"
                             f"{errors}")
