"""Every slash command of the bot, in the order Discord lists them: its path, what Discord shows, its handler.

Handlers live by purpose: submit (competitors submit), browse (competitors read), boards, moderation and operations
(admin commands), verification (is the platform working?). `registry` turns each row into a discord.py command.
"""

from __future__ import annotations

from discord import app_commands

from services.discord.commands import boards, browse, moderation, operations, problem_dirs, submit, verification
from services.discord.commands.common import (
    admin_only,
    admin_or_creator,
    administrator_only,
    board_autocomplete,
    gpu_autocomplete,
    quiet_tree_errors,
)
from services.discord.commands.registry import Slash, alias, build

GROUPS = {
    "leaderboard": "KernelBot leaderboards",
    "leaderboard submit": "Submit a kernel",
    "admin": "Leaderboard administration",
}

SUBMIT_OPTIONS = {"script": "Your kernel (.py, .cu, .cuh, .cpp)",
                  "leaderboard": "Leaderboard (default: the #!POPCORN leaderboard header)",
                  "gpu": "GPU, or a comma-separated list (default: header, or you choose)"}
SUBMIT_COMPLETION = {"leaderboard": board_autocomplete, "gpu": gpu_autocomplete}
SUBMIT = tuple(
    Slash(f"leaderboard submit {mode}", description, submit.submit, SUBMIT_OPTIONS,
          autocomplete=SUBMIT_COMPLETION, fixed={"mode": mode})
    for mode, description in (("test", "Check your kernel against the tests"),
                              ("benchmark", "Time your kernel on the benchmarks"),
                              ("profile", "Profile your kernel"),
                              ("ranked", "A ranked run: tests, benchmarks and the leaderboard")))

BROWSE = (
    Slash("leaderboard list", "All leaderboards", browse.list_boards),
    Slash("leaderboard show", "The ranking of a leaderboard, per GPU, in pages", browse.show,
          {"leaderboard": "Leaderboard", "gpu": "GPU (default: every GPU of the leaderboard)"},
          autocomplete={"leaderboard": board_autocomplete, "gpu": gpu_autocomplete}),
    Slash("leaderboard show-personal", "Your submissions to a leaderboard", browse.show_personal,
          autocomplete={"leaderboard": board_autocomplete}),
    Slash("leaderboard task", "A leaderboard's task and its reference files", browse.task,
          autocomplete={"leaderboard": board_autocomplete}),
    Slash("leaderboard template", "Starter code for a leaderboard", browse.template,
          {"language": "the template's language (default: the first of the leaderboard's)"},
          autocomplete={"leaderboard": board_autocomplete, "language": browse.language_autocomplete}),
    Slash("leaderboard get-submission", "One of your submissions: its code and results", browse.own_submission),
    Slash("leaderboard help", "How to use KernelBot", browse.help_text),
)

ADMIN = (admin_only,)
CREATE_DEV = Slash(
    "admin create-dev-leaderboard", "A leaderboard from a local problem directory", boards.create_dev_leaderboard,
    {"directory": "problem directory under the problems root", "gpu": "GPU or comma list (default: the task's gpus)",
     "closed": "closed: only invited popcorn-cli users see and submit to it"},
    ADMIN, autocomplete={"directory": problem_dirs.autocomplete})
STATS = Slash(
    "admin stats", "Platform statistics, as GET /admin/stats gives them", operations.stats,
    {"last_day_only": "only the last day, with each user's total run time",
     "leaderboard": "only this leaderboard (default: all)"},
    ADMIN, autocomplete={"leaderboard": board_autocomplete})
VERIFY_TASK = Slash(
    "admin verify-task", "Run a problem's solutions/correct and solutions/wrong", verification.verify_task,
    {"directory": "problem directory under the problems root", "gpu": "GPU (default: the task's first)",
     "mode": "which runs (default: ranked)"},
    ADMIN, autocomplete={"directory": problem_dirs.autocomplete}, choices={"mode": tuple(verification.VERIFY_MODES)})
WHO = {"user": "a Discord user", "user_id": "or a user id or name (popcorn-cli users too)"}

ADMINISTRATION = (
    CREATE_DEV,
    alias(CREATE_DEV, "admin create-local", "Upstream's name of create-dev-leaderboard"),
    Slash("admin delete-leaderboard", "Delete a leaderboard; type its name to confirm", boards.delete_leaderboard,
          checks=(admin_or_creator,)),
    Slash("admin delete-submission", "Delete any submission", moderation.delete_submission, checks=ADMIN),
    Slash("admin stop", "Stop accepting submissions", operations.stop, checks=ADMIN),
    Slash("admin start", "Accept submissions again", operations.start, checks=ADMIN),
    Slash("admin update-problems", "Sync leaderboards from a problem repository", boards.update_problems,
          {"repository": "owner/name on GitHub (default: gpu-mode/reference-kernels, or KB_PROBLEMS_REPOSITORY)",
           "branch": "branch of the repository", "problem_set": "one competition file's name",
           "force": "apply significant task changes too",
           "closed": "create the new leaderboards closed (invited popcorn-cli users only)"},
          ADMIN),
    STATS,
    alias(STATS, "admin show-stats", "Upstream's name of stats"),
    Slash("admin export-hf", "Upload leaderboards' submissions to the Hugging Face Hub", operations.export_hf,
          {"leaderboards": "comma-separated leaderboard names", "filename": "file name, ending .parquet",
           "private": "to the private data set (default); the public one takes finished boards",
           "ranked_only": "only ranked submissions (default: every one, failed ones included)"},
          ADMIN),
    Slash("admin set-forum-ids", "Find the forum posts of leaderboards that have none recorded",
          operations.set_forum_ids, checks=ADMIN),
    Slash("admin get-user-names", "The names the platform shows for users, as a JSON file",
          moderation.get_user_names, checks=ADMIN),
    Slash("admin update-user-names", "Rename users from a JSON file of user id -> name",
          moderation.update_user_names, {"attachment": "a JSON object mapping user ids to names"}, ADMIN),
    VERIFY_TASK,
    Slash("admin ban", "Refuse a user's submissions", moderation.ban, WHO, ADMIN),
    Slash("admin unban", "Accept a user's submissions again", moderation.unban, WHO, ADMIN),
    Slash("admin clear-hold", "Clear a false hold: pre-check `hacked` or a score held for review",
          moderation.clear_hold,
          {"submission_id": "the held submission", "reason": "why it is a false positive (audit trail)"}, ADMIN),
    Slash("admin get-submission", "Any submission, secret runs included", moderation.any_submission, checks=ADMIN),
    # Discord's Administrator permission is checked first, as before the table
    Slash("admin resync", "Sync the slash commands to this server", operations.resync,
          checks=(administrator_only, admin_only)),
)

TOP_LEVEL = (
    # upstream's /verify-task is a top-level command; the same one (its admin check included) as /admin verify-task
    alias(VERIFY_TASK, "verify-task", "Run a problem's solutions/correct and solutions/wrong"),
    Slash("ping", "Is the bot alive?", verification.ping),
    Slash("verifydb", "A write and a read through the database", verification.verifydb, checks=ADMIN),
    Slash("verifyruns", "Run a known solution on every GPU of a leaderboard", verification.verifyruns,
          checks=ADMIN),
)

COMMANDS: tuple[Slash, ...] = (*SUBMIT, *BROWSE, *ADMINISTRATION, *TOP_LEVEL)


def register(tree: app_commands.CommandTree, ctx) -> None:
    """Replace the guild's commands with the table's."""
    guild = ctx.client.guild_object
    tree.on_error = quiet_tree_errors  # type: ignore[method-assign]
    tree.clear_commands(guild=guild)
    for command in build(COMMANDS, GROUPS, ctx):
        tree.add_command(command, guild=guild)
