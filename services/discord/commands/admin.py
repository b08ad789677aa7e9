"""`/admin ...`: every command checks the Leaderboard Admin role; resync also needs Administrator.

Each change is published as the event the rest of the platform already knows; the bot decides nothing itself.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import discord
from discord import app_commands

from schemas.events import SubmissionDeleted
from services.core.admin import dev_boards, policy_changes
from services.core.admin import precheck_review as review
from services.core.infrastructure import settle
from services.core.presentation import views
from services.core.problems import apply
from services.core.problems import archive as problem_archive
from services.core.problems import repository as problems_repository
from services.core.problems.sync import ProblemSetNotFound, name_problem
from services.core.readmodel import admin_reads, board_reads, submission_reads
from services.discord.commands import admin_upstream, problem_dirs
from services.discord.commands.common import (
    admin_only,
    admin_or_creator,
    administrator_only,
    alias,
    board_autocomplete,
    is_admin,
    on_error,
    reply,
    text_file,
)
from services.discord.commands.leaderboard import submission_summary
from services.kit.bus import publish


class Confirm(discord.ui.View):
    def __init__(self, user_id: int) -> None:
        super().__init__(timeout=120)
        self.user_id, self.confirmed = user_id, False

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        return interaction.user.id == self.user_id

    @discord.ui.button(label="Delete", style=discord.ButtonStyle.danger)
    async def confirm(self, interaction: discord.Interaction, _button: discord.ui.Button) -> None:
        self.confirmed = True
        await interaction.response.edit_message(content="Deleting …", view=None)
        self.stop()

    @discord.ui.button(label="Cancel", style=discord.ButtonStyle.secondary)
    async def cancel(self, interaction: discord.Interaction, _button: discord.ui.Button) -> None:
        await interaction.response.edit_message(content="Cancelled; nothing was deleted.", view=None)
        self.stop()


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


def group(ctx) -> app_commands.Group:
    admin = app_commands.Group(name="admin", description="Leaderboard administration")
    admin.on_error = on_error

    async def submission_or_reply(interaction: discord.Interaction, submission_id: int):
        """The submission's read-model row; None once the admin has been told it does not exist."""
        row = await submission_reads.submission(ctx.pool, submission_id)
        if row is None:
            await reply(interaction, "❌ Submission not found.")
        return row

    async def delete_board(row, *, force: bool) -> None:
        """As the gateway's admin route does: the live submissions first, then the board, under a fresh tag."""
        events = await dev_boards.deletion_events(ctx.pool, row, force=force)
        await settle.publish_and_settle(ctx.broker, events, ctx.position, settle.PROJECTION_WAIT_S)

    @admin.command(name="create-dev-leaderboard", description="A leaderboard from a local problem directory")
    @app_commands.describe(directory="problem directory under the problems root",
                           gpu="GPU or comma list (default: the task's gpus)",
                           closed="closed: only invited popcorn-cli users see and submit to it")
    @app_commands.autocomplete(directory=problem_dirs.autocomplete(ctx))
    @admin_only()
    async def create_dev(interaction: discord.Interaction, directory: str, gpu: str | None = None,
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

    admin.add_command(alias(create_dev, "create-local", "Upstream's name of create-dev-leaderboard"))

    @admin.command(name="delete-leaderboard", description="Delete a leaderboard; type its name to confirm")
    @admin_or_creator()
    async def delete_leaderboard(interaction: discord.Interaction, leaderboard: str, confirm_name: str,
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
            await reply(interaction, f"❌ `{row['name']}` has {len(live)} submissions; pass `force` to delete them "
                                     "too.")
            return
        await delete_board(row, force=force)
        await reply(interaction, f"✅ Deleted `{row['name']}`" + (f" and {len(live)} submissions." if live else "."))

    @admin.command(name="delete-submission", description="Delete any submission")
    @admin_only()
    async def delete_submission(interaction: discord.Interaction, submission_id: int) -> None:
        row = await submission_or_reply(interaction, submission_id)
        if row is None:
            return
        view = Confirm(interaction.user.id)
        await reply(interaction, f"Delete submission {submission_id} by {row['user_name']}?", view=view)
        if await view.wait() or not view.confirmed:
            return
        await publish(ctx.broker, SubmissionDeleted(submission_id=submission_id, user_id=str(row["user_id"]),
                                                    by_admin=True, correlation_id=str(submission_id)))
        await interaction.edit_original_response(content=f"✅ Submission {submission_id} deleted.", view=None)

    @admin.command(name="stop", description="Stop accepting submissions")
    @admin_only()
    async def stop(interaction: discord.Interaction) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)  # the wait may pass Discord's 3 s
        await policy_changes.set_intake(ctx.broker, ctx.position, False)
        await reply(interaction, "⏸ Intake stopped: new submissions are refused.")

    @admin.command(name="start", description="Accept submissions again")
    @admin_only()
    async def start(interaction: discord.Interaction) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        await policy_changes.set_intake(ctx.broker, ctx.position, True)
        await reply(interaction, "▶ Intake open.")

    @admin.command(name="update-problems", description="Sync leaderboards from a problem repository")
    @app_commands.describe(repository="owner/name on GitHub (default: gpu-mode/reference-kernels, or "
                                      "KB_PROBLEMS_REPOSITORY)",
                           branch="branch of the repository", problem_set="one competition file's name",
                           force="apply significant task changes too",
                           closed="create the new leaderboards closed (invited popcorn-cli users only)")
    @admin_only()
    async def update_problems(interaction: discord.Interaction, repository: str | None = None,
                              branch: str = "main", problem_set: str | None = None, force: bool = False,
                              closed: bool = False) -> None:
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

    @admin.command(name="stats", description="Platform statistics, as GET /admin/stats gives them")
    @app_commands.describe(last_day_only="only the last day, with each user's total run time",
                           leaderboard="only this leaderboard (default: all)")
    @app_commands.autocomplete(leaderboard=board_autocomplete(ctx))
    @admin_only()
    async def stats(interaction: discord.Interaction, last_day_only: bool = False,
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

    admin.add_command(alias(stats, "show-stats", "Upstream's name of stats"))
    admin_upstream.add_commands(admin, ctx, delete_board=delete_board)

    async def _moderate(interaction: discord.Interaction, user: discord.User | None, user_id: str | None,
                        banned: bool) -> str | None:
        """The shared ban (services.core.admin.policy_changes) of a Discord user or of any user the platform knows by id
        or name (a popcorn-cli user signed in with GitHub has no Discord account); their name once the read model shows
        it, None once the admin has been told why not."""
        if (user is None) == (user_id is None):
            await reply(interaction, "❌ Name the user: pick a Discord `user`, or give a `user_id` (or name).")
            return None
        await interaction.response.defer(ephemeral=True, thinking=True)  # the wait may pass Discord's 3 s
        try:
            found = await policy_changes.find_user(ctx.pool, str(user.id) if user else user_id)
            await policy_changes.set_ban(ctx.broker, ctx.pool, ctx.position, found["user_id"], banned)
            return found["user_name"]
        except policy_changes.UnknownUser:
            await reply(interaction, f"❌ {user.name if user else user_id} has never used the platform.")
        except policy_changes.AmbiguousUser as exc:
            await reply(interaction, f"❌ {exc}")
        return None

    @admin.command(name="ban", description="Refuse a user's submissions")
    @app_commands.describe(user="a Discord user", user_id="or a user id or name (popcorn-cli users too)")
    @admin_only()
    async def ban(interaction: discord.Interaction, user: discord.User | None = None,
                  user_id: str | None = None) -> None:
        name = await _moderate(interaction, user, user_id, True)
        if name is not None:
            await reply(interaction, f"🚫 {name} is banned.")

    @admin.command(name="unban", description="Accept a user's submissions again")
    @app_commands.describe(user="a Discord user", user_id="or a user id or name (popcorn-cli users too)")
    @admin_only()
    async def unban(interaction: discord.Interaction, user: discord.User | None = None,
                    user_id: str | None = None) -> None:
        name = await _moderate(interaction, user, user_id, False)
        if name is not None:
            await reply(interaction, f"✅ {name} may submit again.")

    @admin.command(name="clear-hold", description="Clear a false hold: pre-check `hacked` or a score held for review")
    @app_commands.describe(submission_id="the held submission", reason="why it is a false positive (audit trail)")
    @admin_only()
    async def clear_hold(interaction: discord.Interaction, submission_id: int, reason: str = "") -> None:
        # the review use case of the admin route and `kernelbot precheck clear`: the scorer reinstates and rescores
        await interaction.response.defer(ephemeral=True, thinking=True)
        try:
            event = await review.build_clear(ctx.pool, submission_id, interaction.user.name, reason)
        except review.PrecheckError as exc:
            await reply(interaction, f"❌ {exc}")
            return
        await settle.publish_and_settle(ctx.broker, event, ctx.position, settle.PROJECTION_WAIT_S)
        await reply(interaction, f"✅ Cleared submission {submission_id}: it is rescored onto its board.")

    @admin.command(name="get-submission", description="Any submission, secret runs included")
    @admin_only()
    async def get_submission(interaction: discord.Interaction, submission_id: int) -> None:
        row = await submission_or_reply(interaction, submission_id)
        if row is None:
            return
        await reply(interaction, await submission_summary(ctx, row, include_secret=True),
                    files=[text_file(row["file_name"], row["code"])])

    @admin.command(name="resync", description="Sync the slash commands to this server")
    @admin_only()
    @administrator_only()
    async def resync(interaction: discord.Interaction) -> None:
        synced = await ctx.client.tree.sync(guild=ctx.client.guild_object)
        await reply(interaction, f"✅ {len(synced)} commands synced.")

    return admin
