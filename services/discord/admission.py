"""A Discord submission in the submit use case's terms (services.core.submission.submit): who submits, the board and
GPUs its options or its `#!POPCORN` header name, and the mode its command names. A Discord identity is not a
popcorn-cli one, so closed leaderboards refuse it.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg
import discord

from services.core.admission.source_rules import header_directives
from services.core.readmodel import board_reads
from services.core.rules.display_names import display_name
from services.core.submission import submit
from services.core.submission.rate import SubmitRate
from services.discord import repository

MODES = {"test": "test", "benchmark": "benchmark", "profile": "profile", "ranked": "leaderboard"}
ORIGIN = "discord"


@dataclass(frozen=True)
class Script:
    file_name: str
    content: bytes

    def directives(self) -> dict[str, list[str]]:
        """`#!POPCORN` header values; none when the file is not text (the policy then refuses it)."""
        try:
            code = self.content.decode("utf-8")
        except UnicodeDecodeError:
            return {}
        return header_directives(code)


def requested_gpus(option: str | None, script: Script) -> list[str]:
    """GPUs named by the command's option (comma list) or else by the script header; may be empty."""
    if option:
        return [gpu.strip() for gpu in option.split(",") if gpu.strip()]
    return list(script.directives().get("gpus", []))


def requested_board(option: str | None, script: Script) -> str | None:
    if option:
        return option.strip()
    named = script.directives().get("leaderboard")
    return named[0] if named else None


async def board_gpus(pool: asyncpg.Pool, name: str) -> list[str]:
    row = await board_reads.leaderboard(pool, name)
    return sorted(row["gpus"]) if row else []


async def submitter(pool: asyncpg.Pool, user: discord.User | discord.Member) -> submit.Submitter:
    """The Discord user as the platform knows them: their display name, and whether the read model shows a ban."""
    name = display_name("discord", {"global_name": user.global_name, "username": user.name}) or str(user.id)
    person = await repository.user(pool, str(user.id))
    return submit.Submitter(user_id=str(user.id), user_name=name, banned=bool(person and person["banned"]),
                            via_cli=False, origin=ORIGIN)


async def admit(pool: asyncpg.Pool, user: discord.User | discord.Member, board: str, gpus: list[str], mode: str,
                script: Script, rate: SubmitRate | None = None) -> submit.Admission:
    """The submit use case's preliminary admission of a Discord submission, counted against the user's submit rate
    (KB_SUBMIT_RATE, as through the gateway); raises policy.Refused."""
    entry = submit.Entry(leaderboard=board, gpus=tuple(gpus), mode=mode, file_name=script.file_name,
                         content=script.content)
    return await submit.admit(pool, await submitter(pool, user), entry, rate)
