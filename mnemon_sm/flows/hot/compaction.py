"""Pure rules of a compaction commit: revision check, packing, then the pending add.

:func:`plan_compaction` decides, from the source reloaded under the lock, what one
``compact`` event of the hot-memory flow commits: the target's entries replaced by the packed
candidates and, on top of them, the pending add, in one write. So a crash leaves either the
state before both or the state after both, and the add is applied at most once.

Rules (RULE-CMP-n):
1. the source's revision must equal the snapshot's (``RevisionConflict`` otherwise);
2. the budget is an integer in ``0..limit``;
3. candidates are packed by importance into the budget (:func:`maintenance.packing.pack`);
4. kept entries take the place of the target's first entry in the file (the other target's
   entries keep their order); an entry whose content equals a snapshot entry keeps that
   entry's timestamps, a merged one keeps its earliest source's ``created_at``;
5. the pending add is then planned on the compacted store by the ordinary add rules; if it
   would still overflow, nothing is committed;
6. the exact text of every snapshot entry no kept candidate carries over verbatim is the
   round the commit preserves in the hot-memory history before its commit point
   (:func:`~mnemon_sm.flows.hot.history.preserved_round`).
"""

from __future__ import annotations

import attrs

from mnemon_sm.errors import InvalidInput, RevisionConflict
from mnemon_sm.flows.hot.history import HistoryRound, preserved_round
from mnemon_sm.flows.hot.maintenance_values import Candidate
from mnemon_sm.flows.hot.model import HotEntry, HotStore, Target, maintenance_kind
from mnemon_sm.flows.hot.packing import pack
from mnemon_sm.flows.hot.rules import Commit, Mutation, Rejected, Unchanged, plan_mutation

__all__ = ["Compaction", "plan_compaction"]


@attrs.frozen
class Compaction:
    """A checked compaction and the add it makes room for."""

    target: Target
    revision: str
    sources: tuple[HotEntry, ...]  # the snapshot the candidates' indexes refer to
    candidates: tuple[Candidate, ...]
    budget: int
    pending: Mutation
    run_id: str  # the maintenance run, which names the history round


@attrs.frozen
class Compacted:
    """What a compaction commit does besides the add: how many candidates it keeps and the
    round of entries it takes out, for the history (None: nothing is committed)."""

    kept: int
    preserved: HistoryRound | None = None


def plan_compaction(
    store: HotStore, c: Compaction, now: str, limit: int
) -> tuple[Commit | Rejected, Compacted]:
    """Decide what the compaction ``c`` commits on ``store``. Pure."""
    kept_none = Compacted(0)
    actual = store.revision()
    if actual != c.revision:
        error = RevisionConflict(
            "hot memory changed while maintenance was running; nothing was compacted "
            "(run the add again)",
            expected=c.revision,
            actual=actual,
        )
        return Rejected(error), kept_none
    if type(c.budget) is not int or not 0 <= c.budget <= limit:
        return Rejected(InvalidInput("compaction byte budget is invalid")), kept_none
    if len({x.content for x in c.candidates}) != len(c.candidates):
        return Rejected(InvalidInput("compacted entries contain duplicates")), kept_none
    kept = pack([(x.content, x.importance) for x in c.candidates], c.budget)
    kind = maintenance_kind(c.target)
    preserved = preserved_round(
        c.run_id, now, c.target, kind, c.revision, c.sources, c.candidates, kept
    )
    by_content = {e.content: e for e in c.sources}
    fresh: list[HotEntry] = []
    for i in kept:
        x = c.candidates[i]
        same = by_content.get(x.content)
        if same is not None:
            created, updated = same.created_at, same.updated_at
        else:
            created = min((c.sources[s - 1].created_at for s in x.sources), default=now)
            updated = now
        fresh.append(HotEntry(x.content, created, updated, c.target, x.importance))
    entries: list[HotEntry] = []
    placed = False
    for e in store.entries:
        if e.target != c.target:
            entries.append(e)
        elif not placed:
            entries.extend(fresh)
            placed = True
    if not placed:
        entries.extend(fresh)
    compacted = HotStore(tuple(entries))
    outcome = plan_mutation(compacted, c.pending, now, limit)
    done = Compacted(len(kept), preserved)
    if isinstance(outcome, Unchanged):  # the pending add equals a kept entry
        return Commit(compacted, outcome.receipt), done
    if isinstance(outcome, Rejected):
        return outcome, kept_none
    return outcome, done
