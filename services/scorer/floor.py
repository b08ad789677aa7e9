"""The physical floor under every score (docs/operations.md): when a score is held for review instead of ranked.
Pure.

Three rules, in order, each with its reason:

- `roofline`: a case faster than its roofline floor (the task's declared bytes and operations over the GPU's peaks,
  services/core/rules/gpu_peaks.py), less the slack for rounding and timer granularity;
- `best-fraction`: a score below the operator's fraction of the board's best (KB_FLOOR_BEST_FRACTION; 0 is off);
- `sibling`: where the task declares no roofline, one case far ahead of its siblings, the pattern that collapses a
  geometric mean (reference-kernels #159). Cases of one problem differ in size, so each case is compared with the
  same case of the board: the median, per case, over the board's ranked entries (`per_case_median`). A case whose
  ratio to it is below KB_FLOOR_SIBLING_RATIO of the median ratio of the other cases is held. The median, not the
  best entry: a best entry that is itself skewed (one case far faster than the rest, honestly or cleared by an admin)
  would otherwise make every legitimate entry measured against it look skewed the other way. A board with no entry
  yet compares the raw times, with that ratio squared, since honest cases of different sizes differ by up to a few
  hundred times.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from services.core.rules.gpu_peaks import FLOOR_SLACK


@dataclass(frozen=True)
class FloorRules:
    """What the operator set (ScorerSettings)."""

    best_fraction: float = 0.0
    sibling_ratio: float = 0.05


@dataclass(frozen=True)
class Measured:
    """One GPU's score of a submission, with what the floor reads."""

    gpu: str
    score: float  # seconds
    case_means_ns: list[float]  # the public ranked run's benchmark means
    floors_ns: list[float]  # the planned run's roofline floor per case; [] without a declaration
    board_best: float | None = None  # the board's best score on that GPU, None on an empty board
    reference_means_ns: list[float] | None = None  # the board's per-case median of its entries' means (per_case_median)


@dataclass(frozen=True)
class Hold:
    rule: str
    reason: str


def _time(ns: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"


def _roofline(measured: Measured) -> Hold | None:
    if len(measured.floors_ns) != len(measured.case_means_ns):
        return None
    for index, (mean, floor) in enumerate(zip(measured.case_means_ns, measured.floors_ns, strict=True)):
        if mean < floor * (1 - FLOOR_SLACK):
            return Hold("roofline", f"benchmark {index} took {_time(mean)} on {measured.gpu}, below its roofline "
                                    f"floor of {_time(floor)}")
    return None


def _best_fraction(measured: Measured, fraction: float) -> Hold | None:
    best = measured.board_best
    if fraction <= 0 or best is None or measured.score >= best * fraction:
        return None
    return Hold("best-fraction", f"score {_time(measured.score * 1e9)} on {measured.gpu} is below {fraction:g} of "
                                 f"the board's best, {_time(best * 1e9)}")


def compares_cases(means: list[float], floors_ns: list[float], rules: FloorRules) -> bool:
    """Whether the `sibling` rule looks at these case means (and so at the board's per-case median)."""
    return rules.sibling_ratio > 0 and len(means) >= 2 and not floors_ns and all(m > 0 for m in means)


def _sibling(measured: Measured, ratio: float) -> Hold | None:
    means = measured.case_means_ns
    if not compares_cases(means, measured.floors_ns, FloorRules(sibling_ratio=ratio)):
        return None
    reference = measured.reference_means_ns
    compared = reference is not None and len(reference) == len(means) and all(r > 0 for r in reference)
    ratios = [m / r for m, r in zip(means, reference, strict=True)] if compared and reference else means
    threshold = ratio if compared else ratio * ratio
    for index, value in enumerate(ratios):
        siblings = statistics.median(ratios[:index] + ratios[index + 1:])
        if value < siblings * threshold:
            against = "than against the board's median on its other cases" if compared else "than its other cases"
            return Hold("sibling", f"benchmark {index} ({_time(means[index])}) on {measured.gpu} is over "
                                   f"{1 / threshold:.0f} times faster {against}; one case far ahead of its "
                                   f"siblings collapses the aggregate")
    return None


def per_case_median(entries: list[list[float] | None], cases: int) -> list[float] | None:
    """Per benchmark case, the median over the entries' case means; only entries with `cases` positive means count
    (an entry recorded before means were kept, or under another task version, does not). None without any."""
    usable = [entry for entry in entries if entry is not None and len(entry) == cases and all(m > 0 for m in entry)]
    if not usable:
        return None
    return [statistics.median(entry[case] for entry in usable) for case in range(cases)]


def hold(measured: Measured, rules: FloorRules) -> Hold | None:
    """Why this score is held for review; None when it may rank."""
    return (_roofline(measured) or _best_fraction(measured, rules.best_fraction)
            or _sibling(measured, rules.sibling_ratio))
