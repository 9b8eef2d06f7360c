"""An independent reference model of hot memory, written from the reference description.

It restates reference-behaviour 8.1-8.4 and this project's rules (RULE-HOT-1..6) as plainly
as possible, without reusing the library's rules: entries are a list of
``(target, content, importance)`` triples, sizes are recomputed from scratch after every
change, matching scans the list. Only constants are shared with the library (through tests
comparing both), never logic: whitespace is the JavaScript class written out here again.

:meth:`HotModel.predict` answers, for one request, either the name of the error class the
library must raise or the receipt it must return, plus the entries after the request.
"""

from __future__ import annotations

from dataclasses import dataclass

TARGETS = ("user", "memory")
IMPORTANCES = ("critical", "normal", "low")
ACTIONS = ("add", "replace", "remove")
DELIMITER = "\n§\n"
ENTRY_MAX_BYTES = 8192

# ECMAScript WhiteSpace + LineTerminator: TAB VT FF SP NBSP ZWNBSP, category Zs, LF CR LS PS.
JS_WHITESPACE = frozenset(
    "\t\v\f \u00a0\ufeff"
    "\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u202f\u205f\u3000"
    "\n\r\u2028\u2029"
)

MESSAGES = {
    "added": "Entry added.",
    "unchanged": "Entry already exists (no duplicate added).",
    "replaced": "Entry replaced.",
    "removed": "Entry removed.",
}


@dataclass(frozen=True)
class Entry:
    target: str
    content: str
    importance: str


@dataclass(frozen=True)
class Prediction:
    """What one request must do. ``error`` is an error class name, or None for success."""

    entries: tuple[Entry, ...]  # the entries after the request
    error: str | None = None
    message: str | None = None
    target: str | None = None
    entry_count: int | None = None
    used: int | None = None
    limit: int | None = None
    change: tuple[str, ...] = ()  # ("added", c) | ("replaced", from, to) | ("removed", c)
    capacity: tuple[int, int] | None = None  # (used before, projected) of CapacityExceeded

    @property
    def writes(self) -> bool:
        """True when the request changes the source (a commit)."""
        return self.error is None and self.message != MESSAGES["unchanged"]


def collapse(text: str) -> str:
    """Trim JavaScript whitespace; every inner run of it becomes one ASCII space."""
    out: list[str] = []
    gap = False
    for ch in text:
        if ch in JS_WHITESPACE:
            gap = True
            continue
        if gap and out:
            out.append(" ")
        out.append(ch)
        gap = False
    return "".join(out)


def normalized(value: object) -> str | None:
    """The normalized text, or None when the value is invalid (8.3 plus valid Unicode)."""
    if value is None:
        value = ""
    if not isinstance(value, str):
        return None
    text = collapse(value)
    if not text or "§" in text:
        return None
    if any(0xD800 <= ord(ch) <= 0xDFFF for ch in text):
        return None
    if len(text.encode("utf-8")) > ENTRY_MAX_BYTES:
        return None
    return text


def used_bytes(entries: tuple[Entry, ...] | list[Entry], target: str) -> int:
    """Capacity metric: UTF-8 bytes of the target's contents joined by the delimiter."""
    return len(DELIMITER.join(e.content for e in entries if e.target == target).encode("utf-8"))


class HotModel:
    """Hot memory as a plain list of entries with per-target byte limits."""

    def __init__(self, limits: dict[str, int], entries: tuple[Entry, ...] = ()) -> None:
        self.limits = dict(limits)
        self.entries = tuple(entries)

    def of(self, target: str) -> list[Entry]:
        return [e for e in self.entries if e.target == target]

    def used(self, target: str) -> int:
        return used_bytes(self.entries, target)

    def contents(self) -> list[tuple[str, str]]:
        return [(e.target, e.content) for e in self.entries]

    def apply(self, prediction: Prediction) -> None:
        self.entries = prediction.entries

    def predict(
        self,
        action: object,
        target: object,
        content: object = None,
        old_text: object = None,
        importance: object = None,
    ) -> Prediction:
        """The outcome of one request against the current entries (nothing is changed)."""
        same = self.entries
        if target not in TARGETS or action not in ACTIONS:
            return Prediction(same, error="InvalidInput")
        if importance is not None and importance not in IMPORTANCES:
            return Prediction(same, error="InvalidInput")
        assert isinstance(target, str)
        old = normalized(old_text) if action != "add" else ""
        new = normalized(content) if action != "remove" else ""
        if old is None or new is None:
            return Prediction(same, error="InvalidInput")
        mine = [i for i, e in enumerate(same) if e.target == target]
        if action == "add":
            if any(same[i].content == new for i in mine):
                return self._success(same, target, "unchanged", ("added", new))
            entry = Entry(target, new, str(importance or "normal"))
            return self._checked((*same, entry), target, "added", ("added", new))
        hits = [i for i in mine if old in same[i].content]
        if len(hits) > 1:
            exact = [i for i in hits if same[i].content == old]
            if len(exact) == 1:
                hits = exact
        if not hits:
            return Prediction(same, error="NoMatch")
        if len(hits) > 1:
            return Prediction(same, error="AmbiguousMatch")
        index = hits[0]
        found = same[index]
        if action == "remove":
            after = same[:index] + same[index + 1 :]
            return self._checked(after, target, "removed", ("removed", found.content))
        if any(same[i].content == new for i in mine if i != index):
            return Prediction(same, error="DuplicateEntry")
        updated = Entry(target, new, str(importance or found.importance))
        after = (*same[:index], updated, *same[index + 1 :])
        return self._checked(after, target, "replaced", ("replaced", found.content, new))

    def _checked(
        self, after: tuple[Entry, ...], target: str, kind: str, change: tuple[str, ...]
    ) -> Prediction:
        before_used = self.used(target)
        projected = used_bytes(after, target)
        if projected > self.limits[target] and projected > before_used:
            return Prediction(
                self.entries, error="CapacityExceeded", capacity=(before_used, projected)
            )
        return self._success(after, target, kind, change)

    def _success(
        self, after: tuple[Entry, ...], target: str, kind: str, change: tuple[str, ...]
    ) -> Prediction:
        return Prediction(
            after,
            message=MESSAGES[kind],
            target=target,
            entry_count=sum(1 for e in after if e.target == target),
            used=used_bytes(after, target),
            limit=self.limits[target],
            change=change,
        )


def entries_of(items: object) -> tuple[Entry, ...]:
    """Model entries from any iterable of objects with ``target, content, importance``."""
    assert isinstance(items, tuple | list)
    return tuple(Entry(e.target, e.content, e.importance) for e in items)


def mismatch(prediction: Prediction, outcome: object) -> str | None:
    """Why ``outcome`` (a receipt, or the exception raised) is not ``prediction``; None if it is.

    Receipts and errors are read by attribute name, so this module needs nothing from the
    library.
    """
    if prediction.error is not None:
        name = type(outcome).__name__
        if not isinstance(outcome, Exception) or name != prediction.error:
            return f"expected {prediction.error}, got {outcome!r}"
        if prediction.capacity is not None:
            fields = (
                getattr(outcome, "used", None),
                getattr(outcome, "projected", None),
            )
            if fields != prediction.capacity:
                return f"CapacityExceeded (used, projected) {fields} != {prediction.capacity}"
        return None
    if isinstance(outcome, BaseException):
        return f"expected success ({prediction.message}), got {outcome!r}"
    usage = getattr(outcome, "usage", None)
    got = (
        getattr(outcome, "success", None),
        getattr(outcome, "message", None),
        getattr(outcome, "target", None),
        getattr(outcome, "entry_count", None),
        getattr(usage, "used", None),
        getattr(usage, "limit", None),
    )
    want = (
        True,
        prediction.message,
        prediction.target,
        prediction.entry_count,
        prediction.used,
        prediction.limit,
    )
    if got != want:
        return f"receipt (success, message, target, entryCount, used, limit) {got} != {want}"
    replaced = getattr(outcome, "replaced", None)
    change: tuple[object, ...] = (
        getattr(outcome, "added", None),
        (getattr(replaced, "from_", None), getattr(replaced, "to", None)) if replaced else None,
        getattr(outcome, "removed", None),
    )
    kind, *values = prediction.change
    expected: tuple[object, ...] = (
        values[0] if kind == "added" else None,
        (values[0], values[1]) if kind == "replaced" else None,
        values[0] if kind == "removed" else None,
    )
    if change != expected:
        return f"receipt change (added, replaced, removed) {change} != {expected}"
    return None
