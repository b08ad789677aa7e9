"""`/leaderboard ...` for reading: leaderboards, their rankings, tasks and templates, and one's own submissions."""

from __future__ import annotations

import discord
from discord import app_commands

from schemas.contracts import SUBMISSION_MARKER
from services.core.readmodel import board_reads, standing_reads, submission_reads
from services.core.rules import noise
from services.discord import texts
from services.discord.commands.common import public_board_named, reply, text_file

PAGE_SIZE = 10
RANKING_SIZE = 10  # ranks per page of /leaderboard show
RANKING_PAGES = 50  # pages per GPU at most: the first 500 ranks
INTERVALS = noise.RunIntervals()  # the entries' intervals, kept across /leaderboard show
HELP = """**KernelBot**: write a fast GPU kernel, and see where it ranks.
`/leaderboard list`: the leaderboards · `/leaderboard task <name>`: the problem and its reference files
`/leaderboard template <name>`: starter code · `/leaderboard submit ranked <file>`: a ranked run (also `test`,
`benchmark`, `profile`) in the submissions channel · `/leaderboard show <name>`: the ranking per GPU
`/leaderboard show-personal <name>`: your submissions · `/leaderboard get-submission <id>`: one of yours.
A script may name its leaderboard and GPUs in its first lines:
```
#!POPCORN leaderboard vectoradd_py
#!POPCORN gpus cpu
```"""


class Pages(discord.ui.View):
    """Previous / next buttons over pages of text, for the person who asked."""

    def __init__(self, pages: list[str], user_id: int) -> None:
        super().__init__(timeout=300)
        self.pages, self.index, self.user_id = pages, 0, user_id

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        return interaction.user.id == self.user_id

    async def _turn(self, interaction: discord.Interaction, step: int) -> None:
        self.index = (self.index + step) % len(self.pages)
        await interaction.response.edit_message(content=self.pages[self.index], view=self)

    @discord.ui.button(label="◀")
    async def previous(self, interaction: discord.Interaction, _button: discord.ui.Button) -> None:
        await self._turn(interaction, -1)

    @discord.ui.button(label="▶")
    async def next(self, interaction: discord.Interaction, _button: discord.ui.Button) -> None:
        await self._turn(interaction, 1)


def list_pages(rows) -> list[str]:
    lines = [f"`{r['name']}` · {', '.join(sorted(r['gpus']))} · deadline {r['deadline']:%Y-%m-%d}"
             f"{' · closed' if r['visibility'] != 'public' else ''}" for r in rows]
    pages = ["\n".join(lines[i:i + PAGE_SIZE]) for i in range(0, len(lines), PAGE_SIZE)] or ["No leaderboards yet."]
    return [f"**Leaderboards** ({i + 1}/{len(pages)})\n{page}" for i, page in enumerate(pages)]


def ranking_pages(board: str, gpu: str, ranking) -> list[str]:
    """One GPU's ranking, RANKING_SIZE ranks a page, each page titled with the GPU and where it is; an entry tied
    within noise with the one above is marked as on every front end (services/core/rules/noise.py)."""
    ties = INTERVALS.noise(ranking, ranking[0]["ranking_by"] if ranking else "")
    lines = [f"{noise.TIE_MARK + ' ' if tie.tied_within_noise else ''}"
             f"{texts.MEDALS.get(r['rank'], str(r['rank']) + '.')} {r['user_name']} · "
             f"{texts.score_text(r['score'])} · `{r['file_name']}`" for r, tie in zip(ranking, ties, strict=True)]
    chunks = [lines[i:i + RANKING_SIZE] for i in range(0, len(lines), RANKING_SIZE)] or [
        ["no ranked submissions yet"]]
    legend = f"\n-# {noise.TIE_LEGEND}" if any(tie.tied_within_noise for tie in ties) else ""
    return [f"**{board}** · __{gpu}__ ({i + 1}/{len(chunks)})\n" + "\n".join(chunk) + legend
            for i, chunk in enumerate(chunks)]


def template_language(templates: dict, asked: str | None) -> str | None:
    """The template language asked for, matched case-insensitively; the first one when none is asked; None for a
    language the leaderboard has no template in."""
    if asked is None:
        return min(templates)
    return next((name for name in sorted(templates) if name.lower() == asked.strip().lower()), None)


def language_autocomplete(ctx):
    """The template languages of the leaderboard named in the same command, as upstream's drop-down offers them."""
    async def complete(interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        row = await public_board_named(ctx, interaction)
        if row is None:
            return []
        return [app_commands.Choice(name=lang, value=lang) for lang in sorted(row["templates"] or {})
                if current.lower() in lang.lower()][:25]

    return complete


async def _board(ctx, interaction: discord.Interaction, name: str):
    """The leaderboard if the user may read it; a closed one only through popcorn-cli with an invite."""
    row = await board_reads.leaderboard(ctx.pool, name)
    if row is None:
        await reply(interaction, f"❌ Leaderboard `{name}` does not exist.")
        return None
    if row["visibility"] != "public":
        await reply(interaction, "❌ This leaderboard is closed; its participants use popcorn-cli.")
        return None
    return row


async def list_boards(ctx, interaction: discord.Interaction) -> None:
    pages = list_pages(await board_reads.leaderboards(ctx.pool))
    view = Pages(pages, interaction.user.id) if len(pages) > 1 else None
    await reply(interaction, pages[0], view=view)


async def show(ctx, interaction: discord.Interaction, leaderboard: str, gpu: str | None = None) -> None:
    row = await _board(ctx, interaction, leaderboard)
    if row is None:
        return
    gpus = sorted(row["gpus"])
    if gpu is not None and gpu not in gpus:
        await reply(interaction, f"❌ `{row['name']}` does not run on {gpu}; it runs on {', '.join(gpus)}.")
        return
    pages = []
    for name in [gpu] if gpu else gpus:
        _, ranking = await standing_reads.ranking_with_results(ctx.pool, row["id"], name,
                                                                   RANKING_SIZE * RANKING_PAGES, known=INTERVALS.knows)
        pages.extend(ranking_pages(row["name"], name, ranking))
    pages = pages or [f"**{row['name']}** runs on no GPU."]
    view = Pages(pages, interaction.user.id) if len(pages) > 1 else None
    await reply(interaction, pages[0], view=view)


async def show_personal(ctx, interaction: discord.Interaction, leaderboard: str) -> None:
    row = await _board(ctx, interaction, leaderboard)
    if row is None:
        return
    mine = await submission_reads.user_submissions(ctx.pool, str(interaction.user.id), row["id"], 20, 0)
    lines = [f"`{s['id']}` {s['file_name']} · {s['submitted_at']:%Y-%m-%d %H:%M} · "
             + (", ".join(f"{r['gpu_type']}: {texts.score_text(r['score'])}" for r in s["runs"]) or "unranked")
             for s in mine]
    await reply(interaction, "\n".join([f"**Your submissions to {row['name']}**", *lines])
                if lines else "You have no submissions to this leaderboard.")


async def task(ctx, interaction: discord.Interaction, leaderboard: str) -> None:
    row = await _board(ctx, interaction, leaderboard)
    if row is None:
        return
    files = [text_file(name, content) for name, content in sorted(row["task"]["files"].items())
             if content != SUBMISSION_MARKER][:10]
    await reply(interaction, texts.chunk(f"**{row['name']}**\n{row['description'] or ''}")[0], files=files)


async def template(ctx, interaction: discord.Interaction, leaderboard: str, language: str | None = None) -> None:
    row = await _board(ctx, interaction, leaderboard)
    if row is None:
        return
    templates = row["templates"] or {}
    if not templates:
        await reply(interaction, f"`{row['name']}` has no templates.")
        return
    lang = template_language(templates, language)
    if lang is None:
        await reply(interaction, f"❌ `{row['name']}` has no template for `{language}`; choose one of: "
                                 + ", ".join(f"`{name}`" for name in sorted(templates)))
        return
    comment = "//" if lang.lower() in ("cuda", "cu", "cpp", "c++") else "#"
    extension = ".cu" if comment == "//" else ".py"
    body = f"{comment}!POPCORN leaderboard {row['name']}\n\n{templates[lang]}"
    await reply(interaction, f"Starter code for `{row['name']}` ({lang}).",
                files=[text_file(f"{row['name']}_template{extension}", body)])


async def own_submission(ctx, interaction: discord.Interaction, submission_id: int) -> None:
    row = await submission_reads.submission(ctx.pool, submission_id)
    if row is None or str(row["user_id"]) != str(interaction.user.id):
        await reply(interaction, "❌ Submission not found among yours.")
        return
    await reply(interaction, await submission_summary(ctx, row, include_secret=False),
                files=[text_file(row["file_name"], row["code"])])


async def help_text(_ctx, interaction: discord.Interaction) -> None:
    await reply(interaction, HELP)


async def submission_summary(ctx, row, *, include_secret: bool) -> str:
    runs = await submission_reads.submission_runs(ctx.pool, row["id"])
    lines = [f"**Submission {row['id']}** · `{row['leaderboard_name']}` · {row['mode']} · {row['user_name']} · "
             f"{row['job_status'] or 'initial'}" + (f": {row['job_error']}" if row["job_error"] else "")]
    for run in runs:
        if run["secret"] and not include_secret:
            continue
        score = f" · {texts.score_text(run['score'])}" if run["score"] is not None else ""
        lines.append(f"{run['gpu']} {run['stage']}{' (secret)' if run['secret'] else ''}: "
                     f"{'✅ passed' if run['passed'] else '❌ failed'}{score}")
    return "\n".join(lines)
