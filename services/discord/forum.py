"""The forum post of each public leaderboard: made when the board is created, kept up to date when it changes,
archived when it is deleted. Outbox calls (services.discord.delivery), one function per kind."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import asyncpg
import discord

from services.discord import repository, texts

log = logging.getLogger("kernelbot.discord")


async def _active_post(client: discord.Client, guild_id: int, forum_id: int, name: str) -> discord.Thread | None:
    guild = await client.fetch_guild(guild_id)
    return next((t for t in await guild.active_threads() if t.parent_id == forum_id and t.name == name[:100]), None)


async def archived_posts(client: discord.Client, forum_id: int) -> list[discord.Thread]:
    forum = await client.fetch_channel(forum_id)
    return [thread async for thread in forum.archived_threads(limit=None)]


async def find_post(client: discord.Client, guild_id: int, forum_id: int, name: str) -> discord.Thread | None:
    """A board's post by its name, active or archived (posts made before their ids were stored)."""
    found = await _active_post(client, guild_id, forum_id, name)
    if found is None:
        found = next((t for t in await archived_posts(client, forum_id) if t.name == name[:100]), None)
    return found


async def post(client: discord.Client, pool: asyncpg.Pool, layout, body: dict) -> None:
    if not layout.forum_channel:
        return
    name = body["name"]
    if await repository.forum_thread(pool, name) is not None:
        return  # posted already: a retry after the id was stored
    # posted, but the bot stopped before it stored the id: found by name rather than posted twice
    thread = await _active_post(client, layout.guild_id, layout.forum_channel, name)
    if thread is None:
        forum = await client.fetch_channel(layout.forum_channel)
        made = await forum.create_thread(name=name[:100], content=texts.forum_post(
            name, body["description"], body["gpus"], body["deadline"]))
        thread = made.thread
    await repository.store_forum_thread(pool, name, thread.id, body["gpus"])


async def update(client: discord.Client, pool: asyncpg.Pool, _layout, body: dict) -> None:
    """A changed board's post shows its new description and deadline (its first message has the thread's id)."""
    row = await repository.forum_thread(pool, body["name"])
    if row is None:
        return  # a closed board, or one posted before this bot kept ids (see /admin set-forum-ids)
    content = texts.forum_post(body["name"], body["description"], row["gpus"], body["deadline"])
    starter = client.get_partial_messageable(row["thread_id"]).get_partial_message(row["thread_id"])
    try:
        await starter.edit(content=content)
    except discord.NotFound:
        log.info("forum post of %s is gone; forgetting it", body["name"])
        await repository.forget_forum_thread(pool, body["name"])
    except discord.HTTPException as exc:
        if exc.code != 50083:  # "thread is archived": reopened, then edited
            raise
        thread = await client.fetch_channel(row["thread_id"])
        await thread.edit(archived=False)
        await starter.edit(content=content)


async def archive(client: discord.Client, pool: asyncpg.Pool, _layout, body: dict) -> None:
    """A deleted board's post is renamed and archived, as upstream KernelBot does; a board of the same name made
    later gets a post of its own."""
    row = await repository.forum_thread(pool, body["name"])
    if row is None:
        return
    try:
        thread = await client.fetch_channel(row["thread_id"])
        stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M")
        await thread.edit(name=f"{body['name']} - archived at {stamp}"[:100], archived=True)
    except discord.NotFound:
        log.info("forum post of %s is gone already", body["name"])
    await repository.forget_forum_thread(pool, body["name"])
