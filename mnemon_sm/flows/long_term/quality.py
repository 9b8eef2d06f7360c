"""Recall quality policy ``strict-v2`` (pure): which scored hits are worth showing.

Per hit: no score -> kept as ``unknown``; a non-finite score -> dropped; a score <= 0 ->
dropped; a score above 1 -> kept as ``unknown`` (not a normalized relevance); below the low
cut-off -> dropped (``low``); below 0.6 -> ``medium``; otherwise ``high``. The low cut-off is
0.15 for relevance recall and 0.25 (the reference's and Mnemon's "low" confidence) for the
other modes. Selection: every ``high``, then
every ``medium``, then every ``unknown``, in their original order within each tier, cut to the
limit and nothing else: no tier has a quota of its own, so a relevant hit is never hidden
behind a fixed cap (the reference's ``strict-v1`` kept at most 4 ``medium`` and 2 ``unknown``
hits whatever the limit). Per space the policy reports what it fetched, retained, selected and
dropped, and why (low, non-positive, invalid score, or over the limit).

Calibration: relevance scores are a share of the question's information found in the memory
(:mod:`.ranking`). On the project's recall benchmark (``benchmarks/recall_quality.py``), a
cut at 0.25 dropped 9 evidence items that ranked in a question's top 10; at 0.15 none, while
a memory matching only a common word (a name that half the memories carry) still scores
below it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, TypeVar

import attrs

__all__ = [
    "HIGH",
    "LOW",
    "POLICY_ID",
    "QualityReport",
    "Tier",
    "apply_policy",
    "candidate_limit",
    "tier_of",
]

LOW, HIGH = 0.25, 0.6  # the reference's default thresholds; equal to Mnemon's confidence cuts
RELEVANCE_LOW = 0.15  # relevance recall's low cut-off (see the module)
POLICY_ID = "strict-v2"
CANDIDATE_MULTIPLIER = 3  # each space is asked for min(150, 3L) candidates
Tier = Literal["high", "medium", "low", "unknown"]
T = TypeVar("T")


@attrs.frozen
class QualityReport:
    policy_id: str
    fetched: int
    retained: int
    selected: int
    dropped_low_score: int
    dropped_non_positive_score: int
    dropped_invalid_score: int
    dropped_over_limit: int
    unscored: int
    unscaled: int


def candidate_limit(limit: int) -> int:
    """How many candidates to fetch per space for a final ``limit``."""
    return min(150, max(limit, math.ceil(limit * CANDIDATE_MULTIPLIER)))


def low_cutoff(mode: str) -> float:
    """The score under which a hit of ``mode`` is dropped as ``low``."""
    return RELEVANCE_LOW if mode == "relevance" else LOW


def tier_of(score: float | None, low: float = LOW) -> Tier | None:
    """The tier of a score, or None when the hit is dropped."""
    if score is None:
        return "unknown"
    if not math.isfinite(score) or score <= 0:
        return None
    if score > 1:
        return "unknown"
    if score < low:
        return None
    return "medium" if score < HIGH else "high"


def apply_policy(
    hits: Sequence[T], scores: Sequence[float | None], limit: int, *, low: float = LOW
) -> tuple[list[tuple[T, Tier]], QualityReport]:
    """Select hits by tier; returns the chosen hits with their tier, and the report."""
    tiers: dict[str, list[tuple[T, Tier]]] = {"high": [], "medium": [], "unknown": []}
    dropped_low = non_positive = invalid = unscored = unscaled = 0
    for hit, score in zip(hits, scores, strict=True):
        if score is None:
            unscored += 1
        elif not math.isfinite(score):
            invalid += 1
        elif score <= 0:
            non_positive += 1
        elif score > 1:
            unscaled += 1
        elif score < low:
            dropped_low += 1
        tier = tier_of(score, low)
        if tier is not None:
            tiers[tier].append((hit, tier))
    retained = sum(len(v) for v in tiers.values())
    ordered = tiers["high"] + tiers["medium"] + tiers["unknown"]
    chosen = ordered[:limit]
    report = QualityReport(
        POLICY_ID,
        len(hits),
        retained,
        len(chosen),
        dropped_low,
        non_positive,
        invalid,
        len(ordered) - len(chosen),
        unscored,
        unscaled,
    )
    return chosen, report
