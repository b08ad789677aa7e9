"""Rankings rendered once per version of their board's standings (http-api.md §3.7, §3.8; migration 0030).

The ledger bumps a (board, GPU)'s version in the transaction that moves one of its standings, and notifies
`kb_standings`; every gateway replica listens and drops what the move outdated. A request still reads the board with
its current version (one primary-key read), so a replica whose notification is late or lost never serves an outdated
ranking, and who may see the board is decided on every request, cached or not. The version is the stream sequence of
the last event that touched the standings, the same on every replica and after a replay: it makes a strong ETag.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any

from fastapi import Request, Response

from services.kit.listener import Listener
from services.kit.metrics import STANDINGS_CACHE

log = logging.getLogger("kernelbot.gateway.cache")

CHANNEL = "kb_standings"
MAX_BOARDS = 512  # (board, GPU) pairs kept
MAX_VARIANTS = 32  # responses per pair (limits, offsets, users asking for their count, the web page)
CACHE_CONTROL_PUBLIC = "no-cache"  # anyone may keep it, and must ask again (If-None-Match) before using it
CACHE_CONTROL_CLOSED = "private, no-cache"
# Bump when a cached response's shape changes, so an old ETag never matches a new body.
FORMAT = "1"


@dataclass(frozen=True)
class Entry:
    version: int
    etag: str
    value: Any


class StandingsCache:
    def __init__(self) -> None:
        self._boards: OrderedDict[tuple[int, str], tuple[int, OrderedDict[Hashable, Entry]]] = OrderedDict()
        self._listener: Listener | None = None

    async def start(self, database_url: str) -> None:
        self._listener = Listener(database_url, CHANNEL, self._notified, self.clear)
        await self._listener.start()

    async def stop(self) -> None:
        if self._listener is not None:
            await self._listener.stop()

    def _notified(self, payload: str) -> None:
        try:
            moved = json.loads(payload)
            self.moved(int(moved["board"]), str(moved["gpu"]), int(moved["version"]))
        except (ValueError, KeyError, TypeError):
            log.warning("ignored a malformed %s notification: %r", CHANNEL, payload[:200])

    def moved(self, board_id: int, gpu: str, version: int) -> None:
        """The standings of (board, GPU) reached `version`: what was rendered before it goes."""
        held = self._boards.get((board_id, gpu))
        if held is not None and held[0] < version:
            del self._boards[(board_id, gpu)]

    def clear(self) -> None:
        self._boards.clear()

    def get(self, board_id: int, gpu: str, version: int, variant: Hashable) -> Entry | None:
        held = self._boards.get((board_id, gpu))
        entry = held[1].get(variant) if held is not None and held[0] == version else None
        if entry is None:
            STANDINGS_CACHE.labels("miss").inc()
            return None
        STANDINGS_CACHE.labels("hit").inc()
        self._boards.move_to_end((board_id, gpu))
        return entry

    def put(self, board_id: int, gpu: str, version: int, variant: Hashable, value: Any) -> Entry:
        entry = Entry(version, etag(board_id, gpu, version, variant), value)
        held = self._boards.get((board_id, gpu))
        if held is None or held[0] < version:
            held = (version, OrderedDict())
            self._boards[(board_id, gpu)] = held
        elif held[0] > version:
            return entry  # rendered from an older read than one already kept: serve it, keep the newer
        held[1][variant] = entry
        self._boards.move_to_end((board_id, gpu))
        if len(held[1]) > MAX_VARIANTS:
            held[1].popitem(last=False)
        if len(self._boards) > MAX_BOARDS:
            self._boards.popitem(last=False)
        return entry


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
                        render: Callable[[], Awaitable[bytes]]) -> Response:
    """The cached JSON body of (board, GPU, variant) at the board's current version; 304 when the client has it.

    Call only once the caller may see the board: nothing here decides access.
    """
    version = board["standing_version"]
    headers = {"Cache-Control": CACHE_CONTROL_PUBLIC if board["visibility"] == "public" else CACHE_CONTROL_CLOSED}
    tag = etag(board["id"], gpu, version, variant)
    if _matches(request, tag):
        return Response(status_code=304, headers={**headers, "ETag": tag})
    entry = cache.get(board["id"], gpu, version, variant)
    if entry is None:
        entry = cache.put(board["id"], gpu, version, variant, await render())
    return Response(entry.value, media_type="application/json", headers={**headers, "ETag": entry.etag})
