"""Reading an upstream KernelBot deployment's `leaderboard` schema, read only, in one consistent snapshot.

Rows come back as plain dicts (`to_jsonb` of each row), so a deployment migrated to an older schema version, one
without later columns such as `visibility` or `is_banned`, reads the same way: a missing column is a missing key, and
a missing table is an empty list (docs/operations.md, "Switching from upstream: import").
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime

import asyncpg

# Every table the import reads; the others (draft_code) are counted in the report only.
TABLES = ("leaderboard", "gpu_type", "templates", "user_info", "code_files", "submission", "runs",
          "submission_job_status", "leaderboard_invite", "leaderboard_invite_scope", "rate_limit", "draft_code")
SUBMISSION_BATCH = 500

EXISTING = "SELECT to_regclass('leaderboard.' || t) IS NOT NULL FROM unnest($1::text[]) AS t"
ROWS = "SELECT to_jsonb(t) FROM leaderboard.{table} AS t ORDER BY {order}"
COUNT = "SELECT count(*) FROM leaderboard.{table}"
ORPHAN_CODE = """SELECT count(*) FROM leaderboard.code_files c
                 WHERE NOT EXISTS (SELECT 1 FROM leaderboard.submission s WHERE s.code_id = c.id)"""
# A submission with its code (bytea, read as hex so that bytes that are not UTF-8 survive) and job status.
SUBMISSIONS = """
SELECT to_jsonb(s) AS submission, encode(c.code, 'hex') AS code_hex, to_jsonb(c) - 'code' AS code_row,
       {job} AS job
FROM leaderboard.submission s
LEFT JOIN leaderboard.code_files c ON c.id = s.code_id
{job_join}
WHERE s.id > $1 ORDER BY s.id LIMIT $2
"""
FIRST_SEEN = "SELECT leaderboard_id, min(submission_time) FROM leaderboard.submission GROUP BY leaderboard_id"
SUBMISSION_IDS = "SELECT id FROM leaderboard.submission ORDER BY id"
RUNS = "SELECT to_jsonb(r) FROM leaderboard.runs r WHERE r.submission_id = ANY($1::int[]) ORDER BY r.id"


@dataclass
class Catalogue:
    """Everything but the submissions: boards, users and policy."""

    boards: list[dict] = field(default_factory=list)
    gpus: list[dict] = field(default_factory=list)
    templates: list[dict] = field(default_factory=list)
    users: list[dict] = field(default_factory=list)
    invites: list[dict] = field(default_factory=list)
    invite_scopes: list[dict] = field(default_factory=list)
    rate_limits: list[dict] = field(default_factory=list)
    drafts: int = 0
    orphan_code_files: int = 0  # stored code no submission refers to (left by deleted submissions)


@dataclass(frozen=True)
class UpstreamSubmission:
    row: dict
    code: bytes | None
    job: dict | None
    runs: list[dict]


class Upstream:
    def __init__(self, conn: asyncpg.Connection, present: set[str]) -> None:
        self.conn = conn
        self.present = present

    async def _rows(self, table: str, order: str) -> list[dict]:
        if table not in self.present:
            return []
        return [json.loads(r[0]) for r in await self.conn.fetch(ROWS.format(table=table, order=order))]

    async def _count(self, table: str) -> int:
        return await self.conn.fetchval(COUNT.format(table=table)) if table in self.present else 0

    async def catalogue(self) -> Catalogue:
        return Catalogue(
            boards=await self._rows("leaderboard", "t.id"),
            gpus=await self._rows("gpu_type", "t.leaderboard_id, t.gpu_type"),
            templates=await self._rows("templates", "t.id"),
            users=await self._rows("user_info", "t.id"),
            invites=await self._rows("leaderboard_invite", "t.id"),
            invite_scopes=await self._rows("leaderboard_invite_scope", "t.invite_id, t.leaderboard_id"),
            rate_limits=await self._rows("rate_limit", "t.id"),
            drafts=await self._count("draft_code"),
            orphan_code_files=await self.conn.fetchval(ORPHAN_CODE)
            if {"code_files", "submission"} <= self.present else 0,
        )

    async def first_seen(self) -> dict[int, datetime]:
        """Each board's first submission: the nearest upstream records to when the board was made."""
        if "submission" not in self.present:
            return {}
        return {board: at for board, at in await self.conn.fetch(FIRST_SEEN)}

    async def submission_ids(self) -> list[int]:
        if "submission" not in self.present:
            return []
        return [row[0] for row in await self.conn.fetch(SUBMISSION_IDS)]

    async def submissions(self) -> AsyncIterator[UpstreamSubmission]:
        """Every submission in id order, with its code, job status and runs, a batch at a time."""
        if "submission" not in self.present:
            return
        with_jobs = "submission_job_status" in self.present
        query = SUBMISSIONS.format(
            job="to_jsonb(j)" if with_jobs else "NULL::jsonb",
            job_join="LEFT JOIN leaderboard.submission_job_status j ON j.submission_id = s.id" if with_jobs else "")
        after = 0
        while True:
            batch = await self.conn.fetch(query, after, SUBMISSION_BATCH)
            if not batch:
                return
            ids = [json.loads(r["submission"])["id"] for r in batch]
            runs: dict[int, list[dict]] = {}
            if "runs" in self.present:
                for (value,) in await self.conn.fetch(RUNS, ids):
                    run = json.loads(value)
                    runs.setdefault(run["submission_id"], []).append(run)
            for record, submission_id in zip(batch, ids, strict=True):
                code = bytes.fromhex(record["code_hex"]) if record["code_hex"] is not None else None
                yield UpstreamSubmission(json.loads(record["submission"]), code,
                                         json.loads(record["job"]) if record["job"] else None,
                                         runs.get(submission_id, []))
            after = ids[-1]


@asynccontextmanager
async def opened(url: str) -> AsyncIterator[Upstream]:
    """A read-only session on the upstream database, in one repeatable-read snapshot: nothing is written there, and
    a deployment still taking submissions is read as of one moment."""
    conn = await asyncpg.connect(url, server_settings={"default_transaction_read_only": "on"})
    try:
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            flags = await conn.fetch(EXISTING, list(TABLES))
            present = {table for table, (exists,) in zip(TABLES, flags, strict=True) if exists}
            if "leaderboard" not in present:
                raise LookupError("no leaderboard.leaderboard table: not an upstream KernelBot database")
            yield Upstream(conn, present)
    finally:
        await conn.close()
