"""Repository archives for problem sync: download one (docs/authoring.md "Loading problems onto a server") and unpack it
safely.

An archive is untrusted input even from an admin: only regular files are written, every name must stay inside the
destination, and the number of files and the unpacked size are bounded, so a crafted archive can neither write
outside its directory nor fill the disk.
"""

from __future__ import annotations

import io
import re
import tarfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import IO, cast
from urllib.parse import quote

import httpx

REPOSITORY = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+\Z")  # <owner>/<name> on GitHub
MAX_DOWNLOAD_BYTES = 100 * 1024 * 1024
MAX_UNPACKED_BYTES = 300 * 1024 * 1024
MAX_FILES = 50_000
DOWNLOAD_TIMEOUT_S = 60.0


class ArchiveError(Exception):
    """The archive could not be downloaded or unpacked; the message is shown to the admin."""


def archive_url(template: str, repository: str, branch: str) -> str:
    """The download address of a branch; `{repository}` and `{branch}` are filled in URL-quoted."""
    return template.format(repository=quote(repository, safe="/"), branch=quote(branch, safe=""))


async def download(url: str, *, limit: int = MAX_DOWNLOAD_BYTES, timeout_s: float = DOWNLOAD_TIMEOUT_S) -> bytes:
    try:
        async with httpx.AsyncClient(timeout=timeout_s, follow_redirects=True) as client, \
                client.stream("GET", url) as response:
            if response.status_code != 200:
                raise ArchiveError(f"downloading {url} failed: HTTP {response.status_code}")
            chunks, size = [], 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > limit:
                    raise ArchiveError(f"downloading {url} failed: archive larger than {limit} bytes")
                chunks.append(chunk)
            return b"".join(chunks)
    except httpx.HTTPError as exc:
        raise ArchiveError(f"downloading {url} failed: {exc.__class__.__name__}: {exc}") from exc


def _safe_target(destination: Path, name: str) -> Path | None:
    """Where a member may be written, or None for members to leave out (directories, the root itself)."""
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts:
        raise ArchiveError(f"archive member {name!r} points outside the archive")
    parts = [part for part in path.parts if part not in ("", ".")]
    return destination.joinpath(*parts) if parts else None


def _members(data: bytes):
    """(name, size, is_regular_file, read()) for every member of a zip or (compressed) tar archive."""
    if zipfile.is_zipfile(io.BytesIO(data)):
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for info in archive.infolist():
                is_link = (info.external_attr >> 16) & 0o170000 == 0o120000
                yield info.filename, info.file_size, not info.is_dir() and not is_link, (
                    lambda info=info: archive.read(info))
        return
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:
            for member in archive:
                yield member.name, member.size, member.isreg(), (
                    # read only when isreg(), so extractfile gives a file
                    lambda member=member: cast(IO[bytes], archive.extractfile(member)).read())
    except tarfile.ReadError as exc:
        raise ArchiveError(f"not a zip or tar archive: {exc}") from exc


def unpack(data: bytes, destination: Path) -> None:
    """Write the regular files of a zip or tar(.gz) archive under `destination`; links and devices are skipped."""
    files = total = 0
    try:
        for name, size, regular, read in _members(data):
            if not regular:
                _safe_target(destination, name)  # still refuse traversal in names
                continue
            target = _safe_target(destination, name)
            if target is None:
                continue
            files += 1
            total += size
            if files > MAX_FILES or total > MAX_UNPACKED_BYTES:
                raise ArchiveError(f"archive too large (more than {MAX_FILES} files or {MAX_UNPACKED_BYTES} bytes)")
            content = read()
            if len(content) != size:
                raise ArchiveError(f"archive member {name!r} is not the size it declares")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as exc:
        raise ArchiveError(f"cannot unpack the archive: {exc}") from exc


def find_problems_root(unpacked: Path) -> Path:
    """`problems/` at the top, or inside the single top-level folder a repository archive has."""
    for candidate in (unpacked / "problems", *sorted(unpacked.glob("*/problems"))):
        if candidate.is_dir():
            return candidate
    raise ArchiveError("the archive has no problems/ directory")
