"""The scorer's settings (env: KB_ and the field name). Built at start-up and passed down."""

from __future__ import annotations

from services.kit.settings import ServiceSettings


class ScorerSettings(ServiceSettings):
    # Refuse to rank a score measured on hardware unlike the board's first scored one (KB_SAME_HARDWARE); the
    # difference is the comparable part of the fingerprint (services/scorer/fingerprints.py).
    same_hardware: bool = False
    # Rank runs that the runner could not fully isolate (FullResult.isolation other than "full"), marked in their
    # reports (KB_DEVELOPMENT_MODE; `kernelbot up --dev`). Off: such runs are judged but never ranked.
    development_mode: bool = False
