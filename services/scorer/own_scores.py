"""The scores this scorer published, known when they come back to it from the log.

Every ScoreComputed joins the best table through the scorer's `scorer-scores` consumer, because an imported
history's scores arrive only that way (handlers.apply_score_computed). The scorer's own scores are in the table
already: the judging that published one kept it in the same transaction (best_repository.improve, or
best_repository.record for a rescore), so reading one back changes nothing. It still cost a transaction per ranked
run: a quarter of the scorer's statements while a competition is live. This process remembers the ids of the scores
it publishes and acknowledges them when they come back, without a transaction. A score published before a restart,
or forgotten past the bound, takes the transaction as before: the memory only saves work, it never decides. It
belongs to one running kit (one database): a kit started anew, as each test's is, starts with nothing.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from schemas.envelope import Event
from schemas.events import ScoreComputed

KEPT = 100_000  # ids remembered; an id is read back within seconds of its commit


class OwnScores:
    def __init__(self, size: int = KEPT) -> None:
        self._size = size
        self._ids: OrderedDict[str, None] = OrderedDict()
        self._kit: object | None = None

    def _of(self, kit: object) -> OrderedDict[str, None]:
        if kit is not self._kit:
            self._kit, self._ids = kit, OrderedDict()
        return self._ids

    def publishing(self, kit: object, events: Iterable[Event]) -> None:
        """The events a judging through `kit` is committing, to publish: its scores are in the best table with it."""
        ids = self._of(kit)
        for event in events:
            if isinstance(event, ScoreComputed):
                ids[event.event_id] = None
                if len(ids) > self._size:
                    ids.popitem(last=False)

    def came_back(self, kit: object, event: ScoreComputed) -> bool:
        """Whether this is one of those scores, read back from the log: nothing left to apply."""
        return self._of(kit).pop(event.event_id, False) is None
