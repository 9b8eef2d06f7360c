"""Pure rules of a hot-memory mutation: request checks, matching, capacity, receipts.

Nothing here does I/O. :func:`check_request` turns what a caller passed into a normalized
:class:`Mutation` or raises ``InvalidInput``; :func:`plan_mutation` decides, from the freshly
reloaded store, whether the mutation commits (and what the new store and receipt are), changes
nothing (an exact duplicate add), or is rejected with a typed error; :func:`verdict` names
which way a decided request goes, the edge the flow's guards take out of ``deciding``. The
flow calls them; the property tests call them directly against a reference model.

Rules (RULE-HOT-n, cited by the spec and the tests):
1. target is ``user`` or ``memory``; action is ``add``, ``replace`` or ``remove``; importance,
   when given, is ``critical``, ``normal`` or ``low``.
2. content and old_text are normalized (JavaScript whitespace collapsed), required, free of
   ``§``, valid Unicode and at most 8192 UTF-8 bytes.
3. replace/remove match the one entry of the target containing old_text (case-sensitive
   substring); when several contain it but exactly one *equals* it, that one is meant.
4. an add whose content equals an entry of the same target changes nothing and succeeds.
5. a replace may not make its entry equal to another entry of the target.
6. a change may not leave the target above its byte limit unless it shrinks the target.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from json.encoder import encode_basestring
from typing import Any, Literal, get_args

import attrs

from mnemon_sm.convert import converter
from mnemon_sm.errors import (
    AmbiguousMatch,
    CapacityExceeded,
    DuplicateEntry,
    InvalidInput,
    NoMatch,
    RequestRejected,
)
from mnemon_sm.flows.hot.maintenance_values import MaintenanceBlock
from mnemon_sm.flows.hot.model import (
    IMPORTANCES,
    TARGETS,
    HotEntry,
    HotStore,
    Importance,
    Target,
    normalize,
)
from mnemon_sm.ports.hot_format import DELIMITER_SIZE

__all__ = [
    "ACTIONS",
    "Commit",
    "Mutation",
    "Receipt",
    "Rejected",
    "Replacement",
    "Unchanged",
    "Usage",
    "Verdict",
    "check_request",
    "plan_batch",
    "plan_mutation",
    "verdict",
]

Action = Literal["add", "replace", "remove"]
ACTIONS: tuple[Action, ...] = get_args(Action)
_PREVIEW_CHARS = 80  # how much of each candidate an AmbiguousMatch shows


@attrs.frozen
class Mutation:
    """A request that passed RULE-HOT-1 and RULE-HOT-2."""

    action: Action
    target: Target
    content: str | None = None
    old_text: str | None = None
    importance: Importance | None = None


@attrs.frozen
class Usage:
    used: int
    limit: int


@attrs.frozen
class Replacement:
    from_: str
    to: str


@attrs.frozen
class Receipt:
    """The compact receipt of one mutation (exactly one of added / replaced / removed)."""

    success: bool
    message: str
    target: Target
    entry_count: int
    usage: Usage
    added: str | None = None
    replaced: Replacement | None = None
    removed: str | None = None
    maintenance: MaintenanceBlock | None = None  # set when maintenance made room for an add

    def to_json(self) -> dict[str, Any]:
        """JSON shape: ``success, message, target, entryCount, usage, added|replaced|removed``
        and, after maintenance, ``maintenance``."""
        data: dict[str, Any] = converter.unstructure(self)
        return {k: v for k, v in data.items() if v is not None}


@attrs.frozen
class Commit:
    """The mutation applies: write ``store`` and answer with ``receipt``."""

    store: HotStore
    receipt: Receipt

    @property
    def target(self) -> Target:
        """The only target whose projection changes."""
        return self.receipt.target


@attrs.frozen
class Unchanged:
    """The mutation is already in effect: write nothing, answer with ``receipt``."""

    receipt: Receipt


@attrs.frozen
class Rejected:
    """The mutation breaks a rule: write nothing, raise ``error``."""

    error: RequestRejected


Outcome = Commit | Unchanged | Rejected
Verdict = Literal["commit", "duplicate", "rejected", "failed"]


def check_request(
    action: object,
    target: object,
    content: object = None,
    old_text: object = None,
    importance: object = None,
) -> Mutation:
    """Apply RULE-HOT-1 and RULE-HOT-2, or raise ``InvalidInput``."""
    if target not in TARGETS:
        raise InvalidInput("target must be memory or user")
    if action not in ACTIONS:
        raise InvalidInput("action must be add, replace, or remove")
    if importance is not None and importance not in IMPORTANCES:
        raise InvalidInput("importance must be critical, normal, or low")
    old = normalize(old_text, "oldText") if action != "add" else None
    new = normalize(content, "content") if action != "remove" else None
    return Mutation(action, target, new, old, importance)


def plan_mutation(store: HotStore, m: Mutation, now: str, limit: int) -> Outcome:
    """Decide what ``m`` does to ``store`` (RULE-HOT-3..6). Pure."""
    target, entries, used = m.target, store.of(m.target), store.used(m.target)
    if m.action == "add":
        assert m.content is not None
        if m.content in [e.content for e in entries]:
            message = "Entry already exists (no duplicate added)."
            return Unchanged(_receipt(store, target, limit, message, added=m.content))
        entry = HotEntry(m.content, now, now, target, m.importance or "normal")
        size = used + _size(m.content) + (DELIMITER_SIZE if entries else 0)
        after = HotStore.derive(store, (*store.entries, entry), target, (*entries, entry), size)
        return _checked(store, after, target, limit, "Entry added.", added=m.content)
    found = _match(entries, target, m.old_text or "")
    if isinstance(found, RequestRejected):
        return Rejected(found)
    if m.action == "remove":
        size = used - _size(found.content) - (DELIMITER_SIZE if len(entries) > 1 else 0)
        after = HotStore.derive(
            store, _without(store.entries, found), target, _without(entries, found), size
        )
        return _checked(store, after, target, limit, "Entry removed.", removed=found.content)
    assert m.content is not None
    contents = [e.content for e in entries]
    if contents.count(m.content) > (found.content == m.content):  # another entry says it
        return Rejected(
            DuplicateEntry(f"Another {target} entry already says {_quote(m.content)}.")
        )
    updated = HotEntry(
        m.content, found.created_at, now, found.target, m.importance or found.importance
    )
    size = used - _size(found.content) + _size(m.content)
    after = HotStore.derive(
        store, _swap(store.entries, found, updated), target, _swap(entries, found, updated), size
    )
    change = Replacement(found.content, m.content)
    return _checked(store, after, target, limit, "Entry replaced.", replaced=change)


def plan_batch(
    store: HotStore, mutations: Sequence[Mutation], now: str, limit: Callable[[str], int]
) -> tuple[Outcome, tuple[Outcome, ...]]:
    """Decide several mutations in order, each on the store the ones before it left (a
    rejected or unchanged one leaves it as it was), as if each had taken the lock in turn.
    Returns the batch's outcome (a :class:`Commit` of the last store when any member commits;
    else the first member's outcome) and each member's own. Pure."""
    outcomes: list[Outcome] = []
    current, last = store, None
    for m in mutations:
        outcome = plan_mutation(current, m, now, limit(m.target))
        outcomes.append(outcome)
        if isinstance(outcome, Commit):
            current, last = outcome.store, outcome
    overall: Outcome = outcomes[0] if last is None else last
    return overall, tuple(outcomes)


def verdict(outcome: Outcome | None, failure: Exception | None) -> Verdict | None:
    """Which way a request goes once decided: a storage failure wins over any plan; None
    when nothing was decided. Pure."""
    if failure is not None:
        return "failed"
    if isinstance(outcome, Commit):
        return "commit"
    if isinstance(outcome, Unchanged):
        return "duplicate"
    if isinstance(outcome, Rejected):
        return "rejected"
    return None


def _size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def _at(entries: tuple[HotEntry, ...], entry: HotEntry) -> int:
    """The position of ``entry`` itself (not an equal one) in ``entries``."""
    return list(map(id, entries)).index(id(entry))


def _without(entries: tuple[HotEntry, ...], gone: HotEntry) -> tuple[HotEntry, ...]:
    i = _at(entries, gone)
    return entries[:i] + entries[i + 1 :]


def _swap(entries: tuple[HotEntry, ...], old: HotEntry, new: HotEntry) -> tuple[HotEntry, ...]:
    i = _at(entries, old)
    return (*entries[:i], new, *entries[i + 1 :])


def _match(entries: tuple[HotEntry, ...], target: str, old: str) -> HotEntry | RequestRejected:
    matches = [e for e in entries if old in e.content]
    if len(matches) > 1:
        exact = [e for e in matches if e.content == old]
        matches = exact if len(exact) == 1 else matches
    if not matches:
        return NoMatch(f"No {target} entry contains {_quote(old)}.")
    if len(matches) > 1:
        previews = tuple(_preview(e.content) for e in matches)
        return AmbiguousMatch(
            f"Multiple {target} entries contain {_quote(old)}; use a unique substring.", previews
        )
    return matches[0]


def _checked(
    before: HotStore, after: HotStore, target: Target, limit: int, message: str, **change: Any
) -> Commit | Rejected:
    used, projected = before.used(target), after.used(target)
    if projected > limit and projected > used:
        return Rejected(
            CapacityExceeded(
                f"Would exceed {target} runtime memory capacity: {projected} bytes "
                f"(current {used}, limit {limit}). Archive and compact runtime memory "
                "before retrying.",
                target=target,
                used=used,
                projected=projected,
                limit=limit,
            )
        )
    return Commit(after, _receipt(after, target, limit, message, **change))


def _receipt(store: HotStore, target: Target, limit: int, message: str, **change: Any) -> Receipt:
    usage = Usage(store.used(target), limit)
    return Receipt(True, message, target, len(store.of(target)), usage, **change)


def _quote(text: str) -> str:
    quoted: str = encode_basestring(text)  # JSON string syntax, as the reference quotes
    return quoted


def _preview(text: str) -> str:
    return text if len(text) <= _PREVIEW_CHARS else text[: _PREVIEW_CHARS - 1] + "…"


def _register_receipt_hooks() -> None:
    from cattrs.gen import make_dict_unstructure_fn, override

    converter.register_unstructure_hook(
        Replacement,
        make_dict_unstructure_fn(Replacement, converter, from_=override(rename="from")),
    )
    converter.register_unstructure_hook(
        Receipt,
        make_dict_unstructure_fn(Receipt, converter, entry_count=override(rename="entryCount")),
    )


_register_receipt_hooks()
