"""A service's slot (services/kit/consumer.py: KitSlot) between a start and a stop in one process."""

from __future__ import annotations

from services.scorer import handlers
from services.scorer.floor import FloorRules
from services.scorer.handlers import ScorerConfig, kit


def test_a_stopped_scorer_leaves_a_later_replay_to_the_environment(monkeypatch):
    """An operator's replay in a process where a scorer once ran judges by the environment's settings, not by the
    stopped scorer's: the leak once made a replay hold for review a score the live platform had ranked."""
    monkeypatch.setenv("KB_FLOOR_SIBLING_RATIO", "0")
    started = ScorerConfig(same_hardware=True, floor=FloorRules(best_fraction=0.0, sibling_ratio=0.3))
    kit.fill(object(), started)  # type: ignore[arg-type] - what the scorer's app does at start, minus the pool
    try:
        assert handlers._floor_rules().sibling_ratio == 0.3
    finally:
        kit.fill(None)  # what it does at stop
    assert kit.config is None
    assert handlers._floor_rules() == FloorRules(best_fraction=0.0, sibling_ratio=0.0)
    assert handlers._same_hardware() is False
