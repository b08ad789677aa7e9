"""The common envelope every event carries, and the rules that make its message id deterministic."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field


def utcnow() -> datetime:
    return datetime.now(UTC)


class Event(BaseModel):
    """A past-tense fact. Frozen; consumers ignore fields they do not know.

    `event_id` is derived from the business identity (see `identity`) so that re-emitting the same fact
    after a crash yields the same `Nats-Msg-Id` and the stream's duplicate window drops the copy.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    subject: ClassVar[str]
    schema_version: int = 1
    event_id: str = ""
    occurred_at: datetime = Field(default_factory=utcnow)
    correlation_id: str = ""
    causation_id: str = ""

    def identity(self) -> str:
        """The business key of this fact; subclasses name it."""
        raise NotImplementedError

    def model_post_init(self, _context: object) -> None:
        if not self.event_id:
            object.__setattr__(self, "event_id", f"{type(self).__name__}:{self.identity()}")

    @property
    def message_id(self) -> str:
        return self.event_id
