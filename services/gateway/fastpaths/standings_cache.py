"""Rankings rendered once per version of their board's standings (docs/http-api.md "Public reads"; migration 0030).

The ledger bumps a (board, GPU)'s version in the transaction that moves one of its standings, and notifies
`kb_standings`; every gateway replica listens and drops what the move outdated. A request still reads the board with
its current version (one primary-key read), so a replica whose notification is late or lost never serves an outdated
ranking, and who may see the board is decided on every request, cached or not. The version is the stream sequence of
the last event that touched the standings, the same on every replica and after a replay: it makes a strong ETag.

While a competition is live the standings move many times a second and every change outdates every cached answer.
So a change costs at most one render per (board, GPU, variant), however many requests arrive (docs/operations.md,
"Standings and cached rankings"):

- a request answers with any body rendered for its own version or a newer one: a body is rendered by a read that
  began after its version was read, so it shows at least that version's standings;
- a miss joins the render in flight for the same variant when that render is for the request's version or a newer
  one, and starts its own otherwise: nobody waits behind an older render, nor renders what is being rendered;
- the notification of a change starts the render of every variant read since the previous change, so the first
  request after a change usually finds its body rendered or on the way.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any

from fastapi import Request, Response

from services.kit.listener import Listener
from services.kit.metrics import STANDINGS_CACHE, STANDINGS_RENDERS

log = logging.getLogger("kernelbot.gateway.cache")

CHANNEL = "kb_standings"
MAX_BOARDS = 512  # (board, GPU) pairs kept
MAX_VARIANTS = 32  # responses per pair (limits, offsets, users asking for their count, the web page)
CACHE_CONTROL_PUBLIC = "no-cache"  # anyone may keep it, and must ask again (If-None-Match) before using it
CACHE_CONTROL_CLOSED = "private, no-cache"
# Bump when a cached response's shape changes, so an old ETag never matches a new body.
FORMAT = "1"

Render = Callable[[], Awaitable[Any]]


@dataclass(slots=True, eq=False)
class Entry:
    version: int
    etag: str
    value: Any
    render: Render | None = None  # renders the same variant again, for the next version
    read: bool = False  # served to a request: worth rendering ahead when the standings move


class _Held:
    """What one (board, GPU) holds: the bodies of its newest version seen."""

    __slots__ = ("entries", "version")

    def __init__(self, version: int) -> None:
        self.version = version
        self.entries: OrderedDict[Hashable, Entry] = OrderedDict()


class StandingsCache:
    def __init__(self) -> None:
        self._boards: OrderedDict[tuple[int, str], _Held] = OrderedDict()
        self._rendering: dict[tuple[int, str, Hashable], tuple[int, asyncio.Future[Entry]]] = {}
        self._tasks: set[asyncio.Task] = set()

    def subscribe(self, listener: Listener) -> None:
        listener.subscribe(CHANNEL, self._notified, self.clear)

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _notified(self, payload: str) -> None:
        try:
            moved = json.loads(payload)
            self.moved(int(moved["board"]), str(moved["gpu"]), int(moved["version"]))
        except (ValueError, KeyError, TypeError):
            log.warning("ignored a malformed %s notification: %r", CHANNEL, payload[:200])

    def moved(self, board_id: int, gpu: str, version: int) -> None:
        """The standings of (board, GPU) reached `version`: what was rendered before it goes, and what was read of it
        is rendered again at once."""
        held = self._boards.get((board_id, gpu))
        if held is None or held.version >= version:
            return
        self._boards[(board_id, gpu)] = _Held(version)
        for variant, entry in held.entries.items():
            if entry.read and entry.render is not None:
                self._rendered(board_id, gpu, version, variant, entry.render, "ahead")

    def clear(self) -> None:
        self._boards.clear()

    def get(self, board_id: int, gpu: str, version: int, variant: Hashable) -> Entry | None:
        """A body rendered at `version` or later, if one is held."""
        held = self._boards.get((board_id, gpu))
        entry = held.entries.get(variant) if held is not None and held.version >= version else None
        if entry is None:
            STANDINGS_CACHE.labels("miss").inc()
            return None
        STANDINGS_CACHE.labels("hit").inc()
        entry.read = True
        self._boards.move_to_end((board_id, gpu))
        return entry

    async def fetch(self, board_id: int, gpu: str, version: int, variant: Hashable, render: Render) -> Entry:
        """The body of `variant` at `version` or later: held, being rendered, or rendered now by `render`."""
        entry = self.get(board_id, gpu, version, variant)
        return entry if entry is not None else await self.rendered(board_id, gpu, version, variant, render)

    async def rendered(self, board_id: int, gpu: str, version: int, variant: Hashable, render: Render) -> Entry:
        """After a miss: the body of the render in flight for `version` or later, else of a render started now."""
        entry = await asyncio.shield(self._rendered(board_id, gpu, version, variant, render, "request"))
        entry.read = True
        return entry

    def _rendered(self, board_id: int, gpu: str, version: int, variant: Hashable, render: Render,
                  cause: str) -> asyncio.Future[Entry]:
        """The render of `variant` for `version` or a newer one: the one in flight, else a new one."""
        flight = self._rendering.get((board_id, gpu, variant))
        if flight is not None and flight[0] >= version:
            return flight[1]
        STANDINGS_RENDERS.labels(cause).inc()
        future: asyncio.Future[Entry] = asyncio.get_running_loop().create_future()
        future.add_done_callback(_consumed)
        self._rendering[(board_id, gpu, variant)] = (version, future)
        task = asyncio.get_running_loop().create_task(self._render(board_id, gpu, version, variant, render, future))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return future

    async def _render(self, board_id: int, gpu: str, version: int, variant: Hashable, render: Render,
                      future: asyncio.Future[Entry]) -> None:
        try:
            future.set_result(self.put(board_id, gpu, version, variant, await render(), render))
        except BaseException as exc:  # noqa: BLE001 - every request waiting gets the failure, as its own render would
            future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            if self._rendering.get((board_id, gpu, variant), (0, None))[1] is future:
                del self._rendering[(board_id, gpu, variant)]

    def put(self, board_id: int, gpu: str, version: int, variant: Hashable, value: Any,
            render: Render | None = None) -> Entry:
        entry = Entry(version, etag(board_id, gpu, version, variant), value, render)
        held = self._boards.get((board_id, gpu))
        if held is None or held.version < version:
            held = _Held(version)
            self._boards[(board_id, gpu)] = held
        elif held.version > version:
            return entry  # rendered from an older read than one already kept: serve it, keep the newer
        held.entries[variant] = entry
        self._boards.move_to_end((board_id, gpu))
        if len(held.entries) > MAX_VARIANTS:
            held.entries.popitem(last=False)
        if len(self._boards) > MAX_BOARDS:
            self._boards.popitem(last=False)
        return entry


def _consumed(future: asyncio.Future) -> None:
    """A render ahead that failed with nobody waiting is only logged (it is tried again on the next request)."""
    if not future.cancelled() and future.exception() is not None:
        log.debug("rendering a ranking failed: %s", future.exception())


def etag(board_id: int, gpu: str, version: int, variant: Hashable) -> str:
    digest = hashlib.blake2s(repr((FORMAT, board_id, gpu, variant)).encode(), digest_size=8).hexdigest()
    return f'"{version}-{digest}"'


def _matches(request: Request, tag: str) -> bool:
    header = request.headers.get("if-none-match")
    if not header:
        return False
    tokens = {token.strip().removeprefix("W/") for token in header.split(",")}
    return tag in tokens or "*" in tokens


async def json_response(request: Request, cache: StandingsCache, board, gpu: str, variant: Hashable,
                        render: Render) -> Response:
    """The cached JSON body of (board, GPU, variant) at the board's current version; 304 when the client has it.

    Call only once the caller may see the board: nothing here decides access.
    """
    version = board["standing_version"]
    headers = {"Cache-Control": CACHE_CONTROL_PUBLIC if board["visibility"] == "public" else CACHE_CONTROL_CLOSED}
    tag = etag(board["id"], gpu, version, variant)
    if _matches(request, tag):
        return Response(status_code=304, headers={**headers, "ETag": tag})
    entry = await cache.fetch(board["id"], gpu, version, variant, render)
    return Response(entry.value, media_type="application/json", headers={**headers, "ETag": entry.etag})
