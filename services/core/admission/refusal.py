"""A refused submission: the status and exact `detail` a client sees (docs/http-api.md "Submitting"), and when to
retry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn


@dataclass(frozen=True)
class Refusal:
    status: int
    detail: str
    retry_after_s: int | None = None


class Refused(Exception):
    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.detail)
        self.refusal = refusal


def refuse(status: int, detail: str, retry_after_s: int | None = None) -> NoReturn:
    raise Refused(Refusal(status, detail, retry_after_s))
