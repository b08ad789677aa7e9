"""What the bot writes: status lines, verdicts, announcements, and messages cut to Discord's limit. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from services.core.presentation.reports import chunk, format_time
from services.discord.podium import PodiumChange

MESSAGE_LIMIT = 2000
MODE_NAMES = {"test": "test", "benchmark": "benchmark", "profile": "profile", "leaderboard": "ranked"}
MEDALS = {1: "🥇", 2: "🥈", 3: "🥉"}
FAILURE_REASONS = {"timeout": "timed out", "launch_error": "could not be launched", "lost": "was lost",
                   "runner_error": "runner error", "cancelled": "cancelled"}


def score_text(score_s: float) -> str:
    return format_time(score_s * 1e9)


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def header(submission_id: int, leaderboard: str, mode: str, gpus: Sequence[str]) -> str:
    return (f"**Submission {submission_id}**: {MODE_NAMES.get(mode, mode)} run of `{leaderboard}` on "
            f"{', '.join(gpus)}")


def queued_line(gpu: str, secret: bool) -> str:
    return f"⏳ {gpu}{' (secret)' if secret else ''}: queued"


def started_line(gpu: str, secret: bool) -> str:
    return f"⏳ {gpu}{' (secret)' if secret else ''}: running"


def started_from(line: str | None, gpu: str) -> str | None:
    """The line of a run that starts: from its queued line (keeping whether it is secret), or new; None when the
    run is past starting already (its progress or end was applied first)."""
    if not line:
        return started_line(gpu, False)
    if line.startswith("⏳") and line.endswith(": queued"):
        return line.removesuffix("queued") + "running"
    return None


def is_pending(line: str) -> bool:
    """Whether a run line still waits for the run's end (queued, running, progress)."""
    return line.startswith("⏳")


def progress_line(gpu: str, message: str) -> str:
    return f"⏳ {gpu}: {message.strip()[:200]}"


def failed_run_lines(gpu: str, reason: str, detail: str) -> str:
    return f"**{gpu} ❌ failure**\n> {FAILURE_REASONS.get(reason, reason)}{': ' + detail if detail else ''}"


def final_line(submission_id: int, status: str, error: str | None) -> str:
    if status == "succeeded":
        return f"✅ Submission {submission_id} finished."
    return f"❌ Submission {submission_id} {status.replace('_', ' ')}: {error or 'no details'}"


def status_message(head: str, run_lines: Sequence[str], final: str | None) -> str:
    """The ephemeral reply: header, each run's lines, the final line; cut to the message limit."""
    text = "\n".join([head, *run_lines, *([final] if final else [])])
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 2] + " …"


@dataclass(frozen=True)
class Standing:
    """Where a scored submission stands on its board, read from the ranking once the score is in it."""

    rank: int | None  # the user's best entry's rank, when that entry is this submission
    is_best: bool  # this submission is the user's best on the board
    earlier_scores: int  # the user's other ranked submissions on this board and GPU


def verdict(user_mention: str, leaderboard: str, gpu: str, score_s: float, standing: Standing) -> str:
    """The message that ends a ranked submission (🥇/🥈/🥉, Nth place, personal best, successful, first)."""
    score = score_text(score_s)
    where = f"`{leaderboard}` on {gpu}"
    if standing.is_best and standing.rank is not None and standing.rank in MEDALS:
        text = f"{MEDALS[standing.rank]} {ordinal(standing.rank)} place on {where}: {score}"
    elif standing.earlier_scores == 0:
        place = f", {ordinal(standing.rank)} place" if standing.rank else ""
        text = f"🍾 First successful submission on {where}: {score}{place}"
    elif standing.is_best:
        place = f", {ordinal(standing.rank)} place" if standing.rank else ""
        text = f"🎉 Personal best on {where}: {score}{place}"
    else:
        text = f"✅ Successful on {where}: {score}"
    return f"{user_mention} {text}"


def podium_news(leaderboard: str, gpu: str, moved: PodiumChange) -> str:
    """The announcement of a podium change (services.discord.podium says which changes are announced). Names are the
    users' display names, in bold, never mentions."""
    where = f"`{leaderboard}` ({gpu})"
    lines = []
    if moved.new_first is not None:
        lines.append(f"🏆 **{moved.new_first['user_name']}** took first place on {where}: "
                     f"{score_text(moved.new_first['score'])}")
    else:
        lines.extend(f"{MEDALS.get(e['rank'], '🏅')} **{e['user_name']}** entered the top three on {where}: "
                     f"{score_text(e['score'])}" for e in moved.entered)
    left = {str(e["user_id"]) for e in moved.left}
    lines.extend(f"**{e['user_name']}** left the top three." for e in moved.left)
    if moved.dethroned is not None and str(moved.dethroned["user_id"]) not in left:
        lines.append(f"**{moved.dethroned['user_name']}** lost first place.")
    return "\n".join(lines)


def forum_post(name: str, description: str, gpus: Sequence[str], deadline: str) -> str:
    body = description.strip() or "No description."
    text = f"{body}\n\nGPUs: {', '.join(gpus)}\nDeadline: {deadline}\nSubmit with `/leaderboard submit`."
    return chunk(text)[0]

