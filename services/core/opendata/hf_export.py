"""The open data set on the Hugging Face Hub: leaderboards' submissions as one Parquet file in the public data set's
columns (services/core/opendata/dataset.py), uploaded with `huggingface_hub` (which honours HF_ENDPOINT). One home for
the use case: `POST /admin/export-hf`, `/admin export-hf` on Discord and the gateway's schedule all call
`export_to_hub`.
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import asyncpg

from services.core.opendata import dataset
from services.core.readmodel import dataset_reads, operator_reads


class ExportRefused(ValueError):
    """The request itself is wrong (HTTP 400)."""


class ExportNotConfigured(RuntimeError):
    """No token or no data set for the destination asked for (HTTP 503)."""


class ExportFailed(RuntimeError):
    """The Hub refused or could not be reached (HTTP 502)."""


@dataclass(frozen=True)
class Destination:
    token: str
    repo_id: str
    endpoint: str | None  # None: huggingface_hub's own default, which is HF_ENDPOINT when set


@dataclass(frozen=True)
class Exported:
    rows: int
    repo_id: str
    filename: str
    commit_url: str


def destination(settings, private: bool) -> Destination:
    token = settings.hf_token.get_secret_value() if settings.hf_token else ""
    repo_id = settings.hf_private_dataset if private else settings.hf_public_dataset
    if not token or not repo_id:
        raise ExportNotConfigured("Hugging Face export is not configured")
    return Destination(token=token, repo_id=repo_id, endpoint=settings.hf_endpoint or None)


def check_request(leaderboard_ids, filename) -> tuple[list[int], str]:
    if (not isinstance(leaderboard_ids, list) or not leaderboard_ids
            or any(isinstance(v, bool) or not isinstance(v, int) for v in leaderboard_ids)):
        raise ExportRefused("leaderboard_ids must be a non-empty list of integers")
    if not isinstance(filename, str) or not filename.endswith(".parquet") or filename.startswith("/") \
            or ".." in filename.split("/"):
        raise ExportRefused("filename must end with .parquet")
    return leaderboard_ids, filename


async def rows_of(conn: asyncpg.Connection, leaderboard_ids: list[int], private: bool,
                  ranked_only: bool = False) -> list[dict]:
    boards = [await operator_reads.board_by_id(conn, board_id) for board_id in leaderboard_ids]
    missing = [str(i) for i, board in zip(leaderboard_ids, boards, strict=True) if board is None]
    if missing:
        raise ExportRefused(f"Leaderboards not found: {', '.join(missing)}")
    if not private:
        now = datetime.now(UTC)
        active = [b["name"] for b in boards if b["deadline"] > now]
        if active:
            raise ExportRefused(f"Cannot export active leaderboards to the public dataset: {', '.join(active)}")
        closed = [b["name"] for b in boards if b["visibility"] == "closed"]
        if closed:
            raise ExportRefused(f"Cannot export closed leaderboards to the public dataset: {', '.join(closed)}")
    return dataset.best_per_code(await dataset_reads.rows(conn, leaderboard_ids), ranked_only)


def write_parquet(rows: list[dict], path: Path) -> None:
    import pyarrow as pa  # late: only an export needs pyarrow
    import pyarrow.parquet as pq

    columns = [name for name, _ in dataset.COLUMNS]
    table = pa.Table.from_pylist([{c: row[c] for c in columns} for row in rows], schema=dataset.arrow_schema())
    pq.write_table(table, path, compression="snappy")


def upload(rows: list[dict], to: Destination, filename: str) -> str:
    """Write the Parquet file and commit it to the data set; the commit's URL. Blocking: run it in a thread."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    with tempfile.TemporaryDirectory(prefix="kernelbot-export-") as scratch:
        path = Path(scratch) / "export.parquet"
        write_parquet(rows, path)
        api = HfApi(endpoint=to.endpoint, token=to.token)
        try:
            commit = api.upload_file(path_or_fileobj=str(path), path_in_repo=filename, repo_id=to.repo_id,
                                     repo_type="dataset", commit_message=f"KernelBot export: {filename}")
        except HfHubHTTPError as exc:
            raise ExportFailed(" ".join(f"Export failed: {exc}".split())[:300]) from exc
        except OSError as exc:  # the Hub unreachable
            raise ExportFailed(f"Export failed: {exc!r}"[:300]) from exc
    return commit.commit_url


async def export_to_hub(pool: asyncpg.Pool, settings, leaderboard_ids, filename, private: bool = True,
                        ranked_only: bool = False) -> Exported:
    leaderboard_ids, filename = check_request(leaderboard_ids, filename)
    if not isinstance(ranked_only, bool):
        raise ExportRefused("ranked_only must be true or false")
    async with pool.acquire() as conn:  # a wrong request is told so whether or not the Hub is configured
        rows = await rows_of(conn, leaderboard_ids, private, ranked_only)
    to = destination(settings, private)
    commit_url = await asyncio.to_thread(upload, rows, to, filename)
    return Exported(rows=len(rows), repo_id=to.repo_id, filename=filename, commit_url=commit_url)
