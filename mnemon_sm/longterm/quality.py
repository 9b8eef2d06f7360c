"""Recall quality policy ``strict-v1`` (pure): which scored hits are worth showing.

Per hit: no score -> kept as ``unknown``; a non-finite score -> dropped; a score <= 0 ->
dropped; a score above 1 -> kept as ``unknown`` (not a normalized relevance); below 0.25 ->
dropped (``low``); below 0.6 -> ``medium``; otherwise ``high``. Selection: every ``high``, then
up to 4 ``medium``, then up to 2 ``unknown``, in their original order within each tier, cut to
the limit. Per space the policy reports what it fetched, retained, selected and dropped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, TypeVar

import attrs

__all__ = ["HIGH", "LOW", "QualityReport", "Tier", "apply_policy", "candidate_limit", "tier_of"]

LOW, HIGH = 0.25, 0.6  # the reference's default thresholds; equal to Mnemon's confidence cuts
MAX_MEDIUM, MAX_UNKNOWN = 4, 2
CANDIDATE_MULTIPLIER = 3  # each space is asked for min(50, max(L, 3L)) candidates
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
    unscored: int
    unscaled: int


def candidate_limit(limit: int) -> int:
    """How many candidates to fetch per space for a final ``limit``."""
    return min(50, max(limit, math.ceil(limit * CANDIDATE_MULTIPLIER)))


def tier_of(score: float | None) -> Tier | None:
    """The tier of a score, or None when the hit is dropped."""
    if score is None:
        return "unknown"
    if not math.isfinite(score) or score <= 0:
        return None
    if score > 1:
        return "unknown"
    if score < LOW:
        return None
    return "medium" if score < HIGH else "high"


def apply_policy(
    hits: Sequence[T], scores: Sequence[float | None], limit: int
) -> tuple[list[tuple[T, Tier]], QualityReport]:
    """Select hits by tier; returns the chosen hits with their tier, and the report."""
    tiers: dict[str, list[tuple[T, Tier]]] = {"high": [], "medium": [], "unknown": []}
    low = non_positive = invalid = unscored = unscaled = 0
    for hit, score in zip(hits, scores, strict=True):
        if score is None:
            unscored += 1
        elif not math.isfinite(score):
            invalid += 1
        elif score <= 0:
            non_positive += 1
        elif score > 1:
            unscaled += 1
        elif score < LOW:
            low += 1
        tier = tier_of(score)
        if tier is not None:
            tiers[tier].append((hit, tier))
    retained = sum(len(v) for v in tiers.values())
    chosen = tiers["high"] + tiers["medium"][:MAX_MEDIUM] + tiers["unknown"][:MAX_UNKNOWN]
    chosen = chosen[:limit]
    report = QualityReport(
        "strict-v1",
        len(hits),
        retained,
        len(chosen),
        low,
        non_positive,
        invalid,
        unscored,
        unscaled,
    )
    return chosen, report
