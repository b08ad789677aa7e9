"""The server layout the bot works in, found by name or created on first start, over REST (no gateway needed)."""

from __future__ import annotations

import logging

import discord

from services.discord.delivery import Layout

log = logging.getLogger("kernelbot.discord")

CATEGORY = "Leaderboards"
FORUM = "central"
GENERAL = "general"
SUBMISSIONS = "submissions"
ADMIN_ROLE = "Leaderboard Admin"
CREATOR_ROLE = "Leaderboard Creator"
PARTICIPANT_ROLE = "Leaderboard Participant"
ROLES = (ADMIN_ROLE, CREATOR_ROLE, PARTICIPANT_ROLE)


async def ensure_layout(client: discord.Client, guild_id: int) -> Layout:
    guild = await client.fetch_guild(guild_id)
    channels = await guild.fetch_channels()

    def find(name: str, kind: type):
        return next((c for c in channels if c.name == name and isinstance(c, kind)), None)

    category = find(CATEGORY, discord.CategoryChannel) or await guild.create_category(CATEGORY)
    general = find(GENERAL, discord.TextChannel) or await guild.create_text_channel(GENERAL, category=category)
    submissions = find(SUBMISSIONS, discord.TextChannel) or await guild.create_text_channel(
        SUBMISSIONS, category=category, topic="Submit kernels here with /leaderboard submit")
    forum = find(FORUM, discord.ForumChannel)
    if forum is None:
        try:
            forum = await guild.create_forum(FORUM, category=category, topic="One post per leaderboard")
        except discord.HTTPException as exc:  # forums need a Community server
            log.warning("could not create the %r forum (%s); leaderboard posts are off", FORUM, exc)
    roles = {role.name: role for role in await guild.fetch_roles()}
    for name in ROLES:
        if name not in roles:
            roles[name] = await guild.create_role(name=name, mentionable=name != ADMIN_ROLE)
    return Layout(guild_id=guild_id, category=category.id, general_channel=general.id,
                  submissions_channel=submissions.id, forum_channel=forum.id if forum else 0,
                  roles={name: roles[name].id for name in ROLES})
