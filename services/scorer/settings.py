"""The scorer's settings (env: KB_ and the field name). Built at start-up and passed down."""

from __future__ import annotations

from pydantic import Field

from services.kit.settings import ServiceSettings
from services.scorer.floor import FloorRules


class ScorerSettings(ServiceSettings):
    # Refuse to rank a score measured on hardware unlike the board's first scored one (KB_SAME_HARDWARE); the
    # difference is the comparable part of the fingerprint (services/scorer/fingerprints.py).
    same_hardware: bool = False
    # Rank runs that the runner could not fully isolate (FullResult.isolation other than "full"), marked in their
    # reports (KB_DEVELOPMENT_MODE; `kernelbot up --dev`). Off: such runs are judged but never ranked.
    development_mode: bool = False
    # The floor under every score (services/scorer/floor.py, docs/operations.md): a score below this fraction of
    # its board's best is held for review (KB_FLOOR_BEST_FRACTION; 0 turns the rule off) ...
    floor_best_fraction: float = Field(default=0.0, ge=0, le=1)
    # ... and so is one whose case is more than 1/ratio times further ahead of the board's best than its other
    # cases are, where the task declares no roofline (KB_FLOOR_SIBLING_RATIO; 0 turns the rule off).
    floor_sibling_ratio: float = Field(default=0.05, ge=0, lt=1)

    def floor_rules(self) -> FloorRules:
        return FloorRules(self.floor_best_fraction, self.floor_sibling_ratio)
