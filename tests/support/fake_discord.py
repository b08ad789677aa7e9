"""A fake of Discord's REST API at the wire: a real HTTP server that discord.py talks to, recording what it is told.

It keeps a guild with channels, roles, messages and threads, interaction responses and their webhook edits,
synced commands, and serves attachments as a CDN would. Enough of Discord's behaviour is kept to catch the mistakes
that matter: the 2000-character message limit, nonces that make a retried post land once, interaction tokens that
expire, private threads that only their members see, and rate limits (`rate_limits`, fake_discord_limits.py).
"""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from aiohttp import web

from tests.support.fake_discord_limits import RateLimits

MESSAGE_LIMIT = 2000
BOT_ID = 900_000_000_000_000_001
APP_ID = 900_000_000_000_000_002
GUILD_ID = 900_000_000_000_000_003
OWNER_ID = 900_000_000_000_000_004
# Unique across every fake of a test session, as Discord's ids are: a bot's stored ids never name another test's.
_IDS = itertools.count(int(time.time() * 1000) << 22)


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _json(data, status: int = 200) -> web.Response:
    # exactly `application/json`, as Discord sends it: discord.py decodes only that content type
    return web.Response(body=json.dumps(data).encode(), status=status, headers={"Content-Type": "application/json"})


def user_payload(user_id: int, name: str, *, bot: bool = False, global_name: str | None = None) -> dict:
    """A user as Discord sends one: `username` is the account handle, `global_name` the display name (here the
    handle unless told)."""
    return {"id": str(user_id), "username": name, "global_name": global_name or name, "discriminator": "0",
            "avatar": None, "bot": bot, "public_flags": 0}


@dataclass
class FakeDiscord:
    """State of the fake guild; `url` once started."""

    url: str = ""
    channels: dict[int, dict] = field(default_factory=dict)
    roles: dict[int, dict] = field(default_factory=dict)
    messages: dict[int, dict] = field(default_factory=dict)
    thread_members: dict[int, set[int]] = field(default_factory=dict)
    interaction_responses: dict[str, dict] = field(default_factory=dict)  # token -> callback body
    originals: dict[str, int] = field(default_factory=dict)  # token -> message id
    expired_tokens: set[str] = field(default_factory=set)
    commands: list[dict] = field(default_factory=list)
    attachments: dict[str, bytes] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)
    rate_limits: RateLimits = field(default_factory=RateLimits)
    _nonces: dict[tuple[int, str], int] = field(default_factory=dict)
    _runner: web.AppRunner | None = None

    def next_id(self) -> int:
        return next(_IDS)

    # --- what tests read -------------------------------------------------------------------------------------

    def channel_named(self, name: str) -> dict | None:
        return next((c for c in self.channels.values() if c["name"] == name), None)

    def role_named(self, name: str) -> dict | None:
        return next((r for r in self.roles.values() if r["name"] == name), None)

    def messages_in(self, channel_id: int) -> list[dict]:
        return [m for m in self.messages.values() if int(m["channel_id"]) == channel_id]

    def threads_of(self, parent_id: int) -> list[dict]:
        return [c for c in self.channels.values() if c.get("parent_id") == str(parent_id) and c["type"] in (11, 12)]

    def original(self, token: str) -> dict | None:
        message_id = self.originals.get(token)
        return self.messages.get(message_id) if message_id else None

    def answered(self, token: str, content: str) -> dict:
        """An interaction `token` already answered with `content`, as a deferred reply leaves it."""
        message = self._message(0, {"content": content})
        self.interaction_responses[token] = {"type": 5}
        self.originals[token] = int(message["id"])
        return message

    def guild_create_payload(self) -> dict:
        """The GUILD_CREATE the gateway would send once the bot connects."""
        return {
            "id": str(GUILD_ID), "name": "KernelBot test guild", "owner_id": str(OWNER_ID), "icon": None,
            "splash": None, "discovery_splash": None, "afk_channel_id": None, "afk_timeout": 300,
            "verification_level": 0, "default_message_notifications": 0, "explicit_content_filter": 0,
            "features": [], "mfa_level": 0, "system_channel_id": None, "system_channel_flags": 0,
            "rules_channel_id": None, "vanity_url_code": None, "description": None, "banner": None,
            "premium_tier": 0, "preferred_locale": "en-US", "public_updates_channel_id": None, "nsfw_level": 0,
            "premium_progress_bar_enabled": False, "emojis": [], "stickers": [], "unavailable": False,
            "member_count": 1, "large": False, "members": [], "voice_states": [], "presences": [], "threads": [],
            "stage_instances": [], "guild_scheduled_events": [], "joined_at": _now(),
            "roles": list(self.roles.values()),
            "channels": [c for c in self.channels.values() if c["type"] not in (11, 12)],
        }

    # --- the server ----------------------------------------------------------------------------------------------

    async def start(self) -> FakeDiscord:
        everyone = {"id": str(GUILD_ID), "name": "@everyone", "permissions": "1071698660929", "position": 0,
                    "color": 0, "hoist": False, "managed": False, "mentionable": False, "flags": 0}
        self.roles[GUILD_ID] = everyone
        app = web.Application(middlewares=[self._record], client_max_size=32 * 1024 * 1024)
        routes = [
            ("GET", "/api/v10/users/@me", self._me),
            ("GET", "/api/v10/oauth2/applications/@me", self._application),
            ("PUT", "/api/v10/applications/{app}/guilds/{guild}/commands", self._sync_commands),
            ("GET", "/api/v10/guilds/{guild}", self._guild),
            ("GET", "/api/v10/guilds/{guild}/channels", self._list_channels),
            ("POST", "/api/v10/guilds/{guild}/channels", self._create_channel),
            ("GET", "/api/v10/guilds/{guild}/roles", self._list_roles),
            ("GET", "/api/v10/guilds/{guild}/threads/active", self._active_threads),
            ("POST", "/api/v10/guilds/{guild}/roles", self._create_role),
            ("GET", "/api/v10/channels/{channel}", self._get_channel),
            ("PATCH", "/api/v10/channels/{channel}", self._edit_channel),
            ("GET", "/api/v10/channels/{channel}/threads/archived/public", self._archived_threads),
            ("PATCH", "/api/v10/channels/{channel}/messages/{message}", self._edit_message),
            ("POST", "/api/v10/channels/{channel}/messages", self._post_message),
            ("POST", "/api/v10/channels/{channel}/threads", self._create_thread),
            ("PUT", "/api/v10/channels/{channel}/thread-members/{user}", self._add_thread_member),
            ("POST", "/api/v10/interactions/{id}/{token}/callback", self._callback),
            ("GET", "/api/v10/webhooks/{app}/{token}/messages/{message}", self._get_webhook_message),
            ("PATCH", "/api/v10/webhooks/{app}/{token}/messages/{message}", self._edit_webhook_message),
            ("POST", "/api/v10/webhooks/{app}/{token}", self._followup),
            ("GET", "/cdn/attachments/{name}", self._attachment),
        ]
        for method, path, handler in routes:
            app.router.add_route(method, path, handler)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def add_attachment(self, name: str, content: bytes) -> dict:
        """An uploaded file as it appears in an interaction's resolved data."""
        key = f"{self.next_id()}-{name}"
        self.attachments[key] = content
        url = f"{self.url}/cdn/attachments/{key}"
        return {"id": str(self.next_id()), "filename": name, "size": len(content), "url": url, "proxy_url": url,
                "content_type": "text/plain"}

    @web.middleware
    async def _record(self, request: web.Request, handler):
        self.requests.append((request.method, request.path))
        # the bot token is required, except where Discord authenticates by the interaction token in the path
        token_in_path = any(part in request.path for part in ("/cdn/", "/webhooks/", "/interactions/"))
        if not token_in_path and request.headers.get("Authorization") != "Bot fake-token":
            return _json({"message": "401: Unauthorized", "code": 0}, status=401)
        if (limited := self.rate_limits.answer(request)) is not None:
            return limited
        try:
            return await handler(request)
        except web.HTTPException as exc:
            if exc.text and exc.text.startswith("{"):
                return _json(json.loads(exc.text), exc.status)
            raise

    # --- handlers ------------------------------------------------------------------------------------------------

    async def _me(self, _request):
        return _json({**user_payload(BOT_ID, "KernelBot", bot=True), "verified": True, "mfa_enabled": False,
                                  "flags": 0, "email": None})

    async def _application(self, _request):
        return _json({
            "id": str(APP_ID), "name": "KernelBot", "icon": None, "description": "", "bot_public": False,
            "bot_require_code_grant": False, "owner": user_payload(OWNER_ID, "owner"), "verify_key": "0" * 64,
            "flags": 0, "team": None, "summary": "", "rpc_origins": [],
        })

    async def _sync_commands(self, request):
        body = await request.json()
        self.commands = [{**c, "id": str(self.next_id()), "application_id": str(APP_ID), "version": "1",
                          "guild_id": request.match_info["guild"]} for c in body]
        return _json(self.commands)

    async def _guild(self, _request):
        payload = self.guild_create_payload()
        return _json({k: v for k, v in payload.items() if k not in ("members", "channels", "threads")})

    async def _list_channels(self, _request):
        return _json([c for c in self.channels.values() if c["type"] not in (11, 12)])

    async def _create_channel(self, request):
        body = await request.json()
        channel = {"id": str(self.next_id()), "guild_id": str(GUILD_ID), "name": body["name"],
                   "type": body.get("type", 0), "position": len(self.channels), "permission_overwrites": [],
                   "parent_id": str(body["parent_id"]) if body.get("parent_id") else None, "topic": body.get("topic"), "nsfw": False,
                   "available_tags": [], "flags": 0}
        self.channels[int(channel["id"])] = channel
        return _json(channel)

    async def _get_channel(self, request):
        channel = self.channels.get(int(request.match_info["channel"]))
        if channel is None:
            return _json({"message": "Unknown Channel", "code": 10003}, 404)
        return _json(channel)

    async def _active_threads(self, _request):
        threads = [c for c in self.channels.values() if c["type"] in (11, 12)
                   and not c["thread_metadata"]["archived"]]
        return _json({"threads": threads, "members": []})

    async def _archived_threads(self, request):
        parent = request.match_info["channel"]
        threads = [c for c in self.channels.values() if c["type"] in (11, 12) and c.get("parent_id") == parent
                   and c["thread_metadata"]["archived"]]
        return _json({"threads": threads, "members": [], "has_more": False})

    async def _edit_channel(self, request):
        channel = self.channels.get(int(request.match_info["channel"]))
        if channel is None:
            return _json({"message": "Unknown Channel", "code": 10003}, 404)
        body = await request.json()
        if "name" in body:
            channel["name"] = body["name"]
        if "thread_metadata" in channel:
            for key in ("archived", "locked"):
                if key in body:
                    channel["thread_metadata"][key] = body[key]
        return _json(channel)

    async def _edit_message(self, request):
        message = self.messages.get(int(request.match_info["message"]))
        if message is None or message["channel_id"] != request.match_info["channel"]:
            return _json({"message": "Unknown Message", "code": 10008}, 404)
        body, _files = await self._json_or_multipart(request)
        if len(body.get("content") or "") > MESSAGE_LIMIT:
            return _json({"message": "Invalid Form Body", "code": 50035}, status=400)
        if "content" in body:
            message["content"] = body["content"]
            message.setdefault("history", []).append(body["content"])
        message["edited_timestamp"] = _now()
        return _json(message)

    async def _list_roles(self, _request):
        return _json(list(self.roles.values()))

    async def _create_role(self, request):
        body = await request.json()
        role = {"id": str(self.next_id()), "name": body.get("name", "new role"),
                "permissions": str(body.get("permissions", 0)), "position": len(self.roles), "color": 0,
                "hoist": False, "managed": False, "mentionable": bool(body.get("mentionable")), "flags": 0}
        self.roles[int(role["id"])] = role
        return _json(role)

    def _message(self, channel_id: int, body: dict, *, author_id: int = BOT_ID, flags: int = 0) -> dict:
        content = body.get("content") or ""
        if len(content) > MESSAGE_LIMIT:
            raise web.HTTPBadRequest(text=json.dumps({
                "message": "Invalid Form Body", "code": 50035,
                "errors": {"content": {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH",
                                                    "message": "Must be 2000 or fewer in length."}]}}}),
                content_type="application/json")
        message = {
            "id": str(self.next_id()), "channel_id": str(channel_id), "author": user_payload(author_id, "KernelBot",
                                                                                              bot=True),
            "content": content, "timestamp": _now(), "edited_timestamp": None, "tts": False,
            "mention_everyone": False, "mentions": [], "mention_roles": [], "attachments": [],
            "embeds": body.get("embeds") or [], "pinned": False, "type": 0,
            "flags": flags | int(body.get("flags") or 0), "components": body.get("components") or [],
            "files": [],
        }
        self.messages[int(message["id"])] = message
        return message

    async def _json_or_multipart(self, request: web.Request) -> tuple[dict, list[tuple[str, bytes]]]:
        if request.content_type.startswith("multipart/"):
            body, files = {}, []
            async for part in await request.multipart():
                if part.name == "payload_json":
                    body = json.loads(await part.text())
                else:
                    files.append((part.filename or part.name, await part.read()))
            return body, files
        return await request.json(), []

    async def _post_message(self, request):
        channel_id = int(request.match_info["channel"])
        if channel_id not in self.channels:
            return _json({"message": "Unknown Channel", "code": 10003}, status=404)
        body, files = await self._json_or_multipart(request)
        nonce = body.get("nonce")
        if nonce and body.get("enforce_nonce") and (channel_id, str(nonce)) in self._nonces:
            return _json(self.messages[self._nonces[(channel_id, str(nonce))]])
        message = self._message(channel_id, body)
        message["files"] = files
        if nonce:
            self._nonces[(channel_id, str(nonce))] = int(message["id"])
        return _json(message)

    async def _create_thread(self, request):
        parent_id = int(request.match_info["channel"])
        parent = self.channels.get(parent_id)
        if parent is None:
            return _json({"message": "Unknown Channel", "code": 10003}, status=404)
        body = await request.json()
        thread = self.make_thread(parent_id, body["name"], 11 if parent["type"] == 15 else body.get("type", 11))
        if parent["type"] == 15:  # a forum post starts with its message, which has the thread's id
            message = self._message(int(thread["id"]), body.get("message") or {})
            del self.messages[int(message["id"])]
            message["id"] = thread["id"]
            self.messages[int(thread["id"])] = message
            return _json({**thread, "message": message})
        return _json(thread)

    def make_thread(self, parent_id: int, name: str, thread_type: int = 12) -> dict:
        thread = {"id": str(self.next_id()), "guild_id": str(GUILD_ID), "parent_id": str(parent_id),
                  "name": name, "type": thread_type, "owner_id": str(BOT_ID), "flags": 0,
                  "thread_metadata": {"archived": False, "auto_archive_duration": 1440, "locked": False,
                                      "archive_timestamp": _now(), "invitable": False},
                  "message_count": 0, "member_count": 1, "rate_limit_per_user": 0, "applied_tags": []}
        self.channels[int(thread["id"])] = thread
        self.thread_members[int(thread["id"])] = {BOT_ID}
        return thread

    async def _add_thread_member(self, request):
        self.thread_members.setdefault(int(request.match_info["channel"]), set()).add(int(request.match_info["user"]))
        return web.Response(status=204)

    def _check_token(self, token: str):
        if token in self.expired_tokens:
            raise web.HTTPUnauthorized(text=json.dumps({"message": "Invalid Webhook Token", "code": 50027}),
                                       content_type="application/json")

    async def _callback(self, request):
        token = request.match_info["token"]
        self._check_token(token)
        if token in self.interaction_responses:
            return _json({"message": "Interaction has already been acknowledged.", "code": 40060},
                                     status=400)
        body, files = await self._json_or_multipart(request)
        self.interaction_responses[token] = body
        interaction = {"id": request.match_info["id"], "type": 2, "response_message_loading": body["type"] == 5,
                       "response_message_ephemeral": bool((body.get("data") or {}).get("flags", 0) & 64)}
        if body["type"] in (4, 5):
            message = self._message(0, body.get("data") or {})
            message["files"] = files
            self.originals[token] = int(message["id"])
            interaction["response_message_id"] = message["id"]
            return _json({"interaction": interaction, "resource": {"type": body["type"],
                                                                                "message": message}})
        if body["type"] == 7:  # update the message a component sits on: the original one
            message = self.messages[self.originals[token]] if token in self.originals else None
            if message is not None:
                message.update({k: v for k, v in (body.get("data") or {}).items() if k in ("content", "components")})
        return _json({"interaction": interaction})

    def _webhook_message(self, token: str, ref: str) -> dict:
        self._check_token(token)
        message_id = self.originals.get(token) if ref == "@original" else int(ref)
        message = self.messages.get(message_id or 0)
        if message is None:
            raise web.HTTPNotFound(text=json.dumps({"message": "Unknown Message", "code": 10008}),
                                   content_type="application/json")
        return message

    async def _get_webhook_message(self, request):
        return _json(self._webhook_message(request.match_info["token"], request.match_info["message"]))

    async def _edit_webhook_message(self, request):
        message = self._webhook_message(request.match_info["token"], request.match_info["message"])
        body, _files = await self._json_or_multipart(request)
        if len(body.get("content") or "") > MESSAGE_LIMIT:
            return _json({"message": "Invalid Form Body", "code": 50035}, status=400)
        for key in ("content", "components", "embeds"):
            if key in body:
                message[key] = body[key]
        if "content" in body:  # every text the message ever showed, for tests of what a person could have seen
            message.setdefault("history", []).append(body["content"])
        message["edited_timestamp"] = _now()
        message.setdefault("edits", 0)
        message["edits"] += 1
        return _json(message)

    async def _followup(self, request):
        token = request.match_info["token"]
        self._check_token(token)
        body, files = await self._json_or_multipart(request)
        message = self._message(0, body)
        message["files"] = files
        message["followup_of"] = token
        return _json(message)

    async def _attachment(self, request):
        content = self.attachments.get(request.match_info["name"])
        if content is None:
            return web.Response(status=404)
        return web.Response(body=content)
