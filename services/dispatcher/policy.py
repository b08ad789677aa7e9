"""Admission: the one place where a submission is judged acceptable. Pure; the gateway and the dispatcher use it.

Checks follow http-api.md §6 in its order; each failure carries the status and the exact detail a client sees.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime

MAX_SUBMISSION_BYTES = 1_000_000
MAX_FILE_NAME = 255
USER_MODES = ("test", "benchmark", "leaderboard", "profile")
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".zip")
EXTENSIONS_BY_LANG = {"py": (".py",), "cu": (".cu", ".cuh", ".cpp")}


@dataclass(frozen=True)
class LeaderboardView:
    """What admission needs to know about a leaderboard."""

    name: str
    gpus: tuple[str, ...]
    deadline: datetime
    lang: str


@dataclass(frozen=True)
class Refusal:
    status: int
    detail: str


class Refused(Exception):
    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.detail)
        self.refusal = refusal


def _refuse(status: int, detail: str) -> None:
    raise Refused(Refusal(status, detail))


def check_mode(mode: str) -> str:
    mode = mode.lower()
    if mode == "private":
        _refuse(400, "Submission mode 'private' is not supported for this endpoint")
    if mode not in USER_MODES:
        _refuse(400, f"Invalid submission mode value: '{mode}'")
    return mode


def check_leaderboard(name: str, board: LeaderboardView | None) -> LeaderboardView:
    if board is None:
        _refuse(404, f"Leaderboard `{name}` does not exist.")
    return board


def check_gpu(board: LeaderboardView, gpu: str) -> None:
    if not board.gpus:
        _refuse(400, f"No available GPUs for leaderboard `{board.name}`.")
    if gpu not in board.gpus:
        supported = ", ".join(sorted(board.gpus))
        _refuse(400, f"GPU type '{gpu}' is not supported for leaderboard '{board.name}'. Supported GPUs: {supported}")


def check_deadline(board: LeaderboardView, now: datetime) -> None:
    if now > board.deadline:
        _refuse(
            400,
            f"The deadline to submit to {board.name} has passed.\nIt was {board.deadline} and today is {now}.",
        )


def normalise_file_name(raw: str | None) -> str:
    name = os.path.basename((raw or "").replace("\\", "/")) or "submission.py"
    if len(name) > MAX_FILE_NAME:
        _refuse(400, "File name is too long")
    if any(ord(ch) < 32 for ch in name):
        _refuse(400, "File name contains control characters")
    return name


def check_file(board: LeaderboardView, file_name: str, content: bytes) -> str:
    """Steps 9-13 of http-api.md §6; returns the decoded code."""
    lower = file_name.lower()
    if lower.endswith(ARCHIVE_SUFFIXES):
        _refuse(400, "Archive submissions are not supported; submit a single .py, .cu, .cuh or .cpp file.")
    if not lower.endswith((".py", ".cu", ".cuh", ".cpp")):
        _refuse(400, "Please provide a Python (.py) or CUDA (.cu / .cuh / .cpp) file")
    accepted = EXTENSIONS_BY_LANG.get(board.lang, ())
    if accepted and not lower.endswith(accepted):
        _refuse(400, f"Leaderboard '{board.name}' accepts {' / '.join(accepted)} files")
    if not content:
        _refuse(400, "Empty file submitted. Please provide a file with code.")
    if len(content) > MAX_SUBMISSION_BYTES:
        _refuse(413, "Submission file is too large (limit: 1MB).")
    try:
        code = content.decode("utf-8")
    except UnicodeDecodeError:
        _refuse(400, "Failed to decode submission file content as UTF-8.")
    if "\x00" in code:
        _refuse(400, "Failed to decode submission file content as UTF-8.")
    return code


def admit(
    *,
    leaderboard_name: str,
    board: LeaderboardView | None,
    gpus: list[str],
    mode: str,
    file_name: str,
    code: str,
    now: datetime,
) -> Refusal | None:
    """The dispatcher's authoritative decision on a received submission; None means accepted."""
    try:
        check_mode(mode)
        board = check_leaderboard(leaderboard_name, board)
        if not gpus:
            _refuse(400, "No GPU selected")
        for gpu in gpus:
            check_gpu(board, gpu)
        check_deadline(board, now)
        check_file(board, normalise_file_name(file_name), code.encode("utf-8", errors="surrogatepass"))
    except Refused as refused:
        return refused.refusal
    return None
