"""When a board's top moved enough to announce (upstream KernelBot's top-three announcement): a new #1, or
someone entering or leaving the first three places. A better score of someone already there, or places swapped
below #1, is not news; nor is anything on a beginner board. One rule for every front end that announces. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

PODIUM_SIZE = 3
# Upstream's beginner boards (its practice problems): their podium changes all the time and tells nobody anything.
BEGINNER_BOARDS = frozenset({"conv2d_v2", "grayscale_v2", "histogram_v2", "matmul_v2", "prefixsum_v2", "sort_v2",
                             "vectoradd_v2", "vectorsum_v2"})


@dataclass(frozen=True)
class PodiumChange:
    """What moved: the new #1 (None: the same one), who entered and who left the first three (entries as ranked)."""

    new_first: dict | None
    dethroned: dict | None
    entered: tuple[dict, ...]
    left: tuple[dict, ...]


def announced_board(leaderboard: str) -> bool:
    return leaderboard.lower() not in BEGINNER_BOARDS


def change(top: Sequence[dict], previous: Sequence[dict]) -> PodiumChange | None:
    """The change from `previous` to `top` (rank entries, best first), or None when it is not worth announcing."""
    after, before = list(top[:PODIUM_SIZE]), list(previous[:PODIUM_SIZE])
    after_ids, before_ids = [str(e["user_id"]) for e in after], [str(e["user_id"]) for e in before]
    new_first = bool(after_ids) and (not before_ids or before_ids[0] != after_ids[0])
    entered = tuple(e for e in after if str(e["user_id"]) not in before_ids)
    left = tuple(e for e in before if str(e["user_id"]) not in after_ids)
    if not (new_first or entered or left):
        return None
    return PodiumChange(new_first=after[0] if new_first else None,
                        dethroned=before[0] if new_first and before else None, entered=entered, left=left)
