"""What ranks and what is best, in one place for the ledger's standings and the scorer's own best table.

A score row (the `scores` table, or the scorer's verdict behind it) already is an eligible public run: the scorer
publishes a ScoreComputed only for a passed public leaderboard run whose secret twin passed (docs/quickstart.md).
What can still take it off a board is the submission's fate: deleted, or marked hacked. A user's best is the lowest score;
equal scores go to the earlier submission, then the lower id, whichever replica judged or projected first.
Banning a user changes nothing here: existing results stay visible (docs/http-api.md "Admin routes").
"""

from __future__ import annotations

# Columns of the order "best first", over a row that has score, submitted_at and submission_id.
BEST_FIRST = ("score", "submitted_at", "submission_id")
# The condition on the submission (aliased `s`) for its scores to rank.
SUBMISSION_STANDS = "s.status <> 'hacked' AND NOT s.deleted"


def best_first(alias: str = "") -> str:
    """The ORDER BY list of best first, optionally qualified: `sc.score, sc.submitted_at, sc.submission_id`."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(prefix + column for column in BEST_FIRST)


def better_than(new: str, old: str) -> str:
    """SQL: the row `new` is strictly better than the row `old` (both aliases or table names)."""
    return f"({best_first(new)}) < ({best_first(old)})"


def ranks_ahead(other: str, own: str) -> str:
    """SQL: the row `other` ranks ahead of the row `own`. Ranks are standard competition ranks, 1 + the number of rows
    ahead: only a strictly lower score is ahead, so equal scores share a rank (1, 1, 3), though best_first lists the
    earlier one first (services/scorer/scoring.competition_ranks is the same rule over a sorted list)."""
    return f"{other}.score < {own}.score"
