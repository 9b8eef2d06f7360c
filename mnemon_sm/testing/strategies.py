"""Hypothesis strategies for the hot-memory property tests.

Theory of operation
-------------------
Hot memory is exercised through three kinds of generated input:

- *texts*: entry content and ``old_text`` built from pieces: ordinary words from a small
  vocabulary (so substrings collide and matches are often ambiguous), random Unicode including
  astral characters (emoji, CJK extension B), runs of JavaScript whitespace (every character of
  :data:`mnemon_sm.text.WHITESPACE`, including U+3000, U+FEFF and U+00A0), characters Python
  treats as whitespace but JavaScript does not (U+001C..U+001F, U+0085), zero-width look-alikes
  and, sometimes, the reserved ``§`` delimiter or a lone surrogate;
- *sized texts*: texts whose normalized UTF-8 size is exactly a given number of bytes, mixing
  1- to 4-byte characters and decorated with whitespace that normalization removes, so
  capacity limits and the 8192-byte entry limit are hit on, just below and just above the edge;
- *requests*: :class:`MutationRequest` values (add, replace, remove) whose ``old_text`` is
  drawn from the current entries (whole contents, substrings, re-spaced or re-cased copies)
  or at random, with valid and invalid targets and importances.

Everything here is deterministic given Hypothesis' choices and does no I/O. Stores built by
:func:`hot_stores` hold only entries ``parse_source`` accepts (normalized content).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from mnemon_sm.errors import MnemonError
from mnemon_sm.flows.hot.api import HotMemory
from mnemon_sm.flows.hot.model import (
    DELIMITER,
    ENTRY_MAX_BYTES,
    IMPORTANCES,
    TARGETS,
    HotEntry,
    HotStore,
    Target,
)
from mnemon_sm.flows.hot.rules import Receipt
from mnemon_sm.text import collapse_whitespace, iso_ms

__all__ = [
    "ACTIONS",
    "ASTRAL",
    "JS_WHITESPACE",
    "NOT_WHITESPACE",
    "PYTHON_ONLY_WHITESPACE",
    "RESERVED",
    "WORDS",
    "MutationRequest",
    "entry_texts",
    "hot_entries",
    "hot_stores",
    "importances",
    "mutation_requests",
    "old_texts",
    "sized_texts",
    "targets",
    "timestamps",
    "valid_contents",
    "whitespace_runs",
]

ACTIONS: tuple[str, ...] = ("add", "replace", "remove")
RESERVED = "§"
#: Every JavaScript whitespace character (``String.prototype.trim`` and ``\\s``), spelled out.
JS_WHITESPACE: tuple[str, ...] = (
    "\t", "\n", "\v", "\f", "\r", " ", "\u00a0", "\u1680",
    *(chr(c) for c in range(0x2000, 0x200B)),
    "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\ufeff",
)  # fmt: skip
#: Python's ``str.isspace`` says yes, JavaScript says no: these must survive normalization.
PYTHON_ONLY_WHITESPACE: tuple[str, ...] = ("\x1c", "\x1d", "\x1e", "\x1f", "\x85")
#: Invisible characters that are not whitespace in either language.
NOT_WHITESPACE: tuple[str, ...] = ("\u200b", "\u180e", "\u2060", "\u200d")
#: A small vocabulary: shared prefixes and case variants make substring matches collide.
WORDS: tuple[str, ...] = (
    "user", "User", "prefers", "pref", "concise", "replies", "pnpm", "verify", "release",
    "test", "tests", "a", "ab", "abc", "café", "naïve", "Straße", "日本語", "中文", "记忆",
    "ユーザー", "한국어", "Ελληνικά", "emoji😀", "{{name}}", '"quoted"', "back\\slash",
    "</runtime-memory-file>", "tab\tinside", "x",
)  # fmt: skip
#: Characters outside the Basic Multilingual Plane (4 UTF-8 bytes, 2 UTF-16 units).
ASTRAL: tuple[str, ...] = ("😀", "🧠", "🇨🇳", "\U0001d518", "𠀋", "𩸽", "👩\u200d💻")
# Building blocks of sized texts, by UTF-8 width (no whitespace, no delimiter).
_SIZED_ALPHABET: tuple[str, ...] = (
    "a", "b", "x", "Z", "-", ".", "é", "ß", "ñ", "中", "語", "€", "😀", "\U0001d518", "𠀋",
)  # fmt: skip


def whitespace_runs(min_size: int = 1, max_size: int = 4) -> SearchStrategy[str]:
    """A run of JavaScript whitespace (collapses to one space, or to nothing at an edge)."""
    return st.text(alphabet=st.sampled_from(JS_WHITESPACE), min_size=min_size, max_size=max_size)


def _unicode_pieces() -> SearchStrategy[str]:
    return st.one_of(
        st.text(st.characters(codec="utf-8", exclude_characters=RESERVED), min_size=1, max_size=6),
        st.sampled_from(ASTRAL),
        st.lists(st.sampled_from((*ASTRAL, "é", "中", "ß", "€")), min_size=1, max_size=4).map(
            "".join
        ),
    )


def _pieces() -> SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(WORDS),
        whitespace_runs(),
        st.sampled_from(WORDS),
        st.just(" "),
        st.sampled_from(WORDS),
        _unicode_pieces(),
        st.sampled_from(WORDS),
        whitespace_runs(),
        st.sampled_from(PYTHON_ONLY_WHITESPACE + NOT_WHITESPACE),
    )


@st.composite
def entry_texts(
    draw: st.DrawFn, *, reserved: bool = True, surrogates: bool = False, max_pieces: int = 8
) -> str:
    """Raw request text from words, Unicode and whitespace runs; it may normalize to nothing,
    and sometimes (``reserved``) holds ``§`` or (``surrogates``) a lone surrogate."""
    pieces = draw(st.lists(_pieces(), max_size=max_pieces))
    if reserved and draw(st.integers(0, 7)) == 7:
        pieces.insert(draw(st.integers(0, len(pieces))), RESERVED)
    if surrogates and draw(st.integers(0, 7)) == 7:
        lone = draw(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF))
        pieces.insert(draw(st.integers(0, len(pieces))), lone)
    return "".join(pieces)


def valid_contents(max_pieces: int = 5) -> SearchStrategy[str]:
    """Normalized content that ``normalize`` accepts (non-empty, no ``§``, small)."""
    return st.tuples(
        st.sampled_from(WORDS), entry_texts(reserved=False, max_pieces=max_pieces)
    ).map(lambda parts: collapse_whitespace(parts[0] + " " + parts[1]))


@st.composite
def sized_texts(draw: st.DrawFn, size: int, *, decorate: bool = True) -> str:
    """Text whose normalized form is exactly ``size`` UTF-8 bytes (``size`` >= 1).

    A short random pattern of 1- to 4-byte characters is repeated and padded with ASCII;
    when ``decorate`` is set, JavaScript whitespace that normalization removes (edge runs) or
    collapses (an inner run standing for one space) is added around it.
    """
    assert size >= 1
    pattern = draw(st.text(st.sampled_from(_SIZED_ALPHABET), min_size=1, max_size=6))
    width = len(pattern.encode("utf-8"))
    body = pattern * (size // width)
    body += "x" * (size - len(body.encode("utf-8")))
    if not decorate or not draw(st.booleans()):
        return body
    if len(body) > 2 and draw(st.booleans()):
        cut = draw(st.integers(1, len(body) - 2))
        if body[cut].isascii():
            # one character of the body becomes a whitespace run (still one byte: a space)
            body = body[:cut] + draw(whitespace_runs()) + body[cut + 1 :]
    return draw(whitespace_runs(0, 3)) + body + draw(whitespace_runs(0, 3))


def targets(*, invalid: bool = True) -> SearchStrategy[object]:
    """A target; sometimes (``invalid``) one ``check_request`` refuses."""
    valid: SearchStrategy[object] = st.sampled_from(TARGETS)
    if not invalid:
        return valid
    bad: SearchStrategy[object] = st.sampled_from(("USER", "users", "", " user", "Memory", None))
    return st.integers(0, 15).flatmap(lambda n: bad if n == 15 else valid)


def importances(*, invalid: bool = True) -> SearchStrategy[object]:
    """No importance, a valid one or (``invalid``) a misspelled one."""
    valid: SearchStrategy[object] = st.one_of(st.none(), st.sampled_from(IMPORTANCES))
    if not invalid:
        return valid
    bad: SearchStrategy[object] = st.sampled_from(("high", "Normal", "", "critical "))
    return st.integers(0, 15).flatmap(lambda n: bad if n == 15 else valid)


def timestamps() -> SearchStrategy[str]:
    """``created_at`` / ``updated_at`` values: ISO times, or any text (the format allows it)."""
    return st.one_of(
        st.integers(0, 4_102_444_800_000).map(iso_ms),
        st.text(st.characters(codec="utf-8"), max_size=12),
    )


def hot_entries(target: Target | None = None) -> SearchStrategy[HotEntry]:
    """One valid entry (normalized content)."""
    return st.builds(
        HotEntry,
        content=valid_contents(),
        created_at=timestamps(),
        updated_at=timestamps(),
        target=st.just(target) if target is not None else st.sampled_from(TARGETS),
        importance=st.sampled_from(IMPORTANCES),
    )


@st.composite
def hot_stores(draw: st.DrawFn, max_entries: int = 10, *, unique: bool = True) -> HotStore:
    """A store as ``parse_source`` could return it; ``unique`` keeps (target, content) unique
    (what the mutation rules maintain)."""
    entries = draw(st.lists(hot_entries(), max_size=max_entries))
    if unique:
        seen: set[tuple[str, str]] = set()
        kept = []
        for e in entries:
            if (e.target, e.content) not in seen:
                seen.add((e.target, e.content))
                kept.append(e)
        entries = kept
    return HotStore(tuple(entries))


@attrs.frozen
class MutationRequest:
    """What a caller passes to ``HotMemory.add/replace/remove`` (possibly invalid)."""

    action: str
    target: object
    content: object = None
    old_text: object = None
    importance: object = None

    def send(self, hot: HotMemory) -> Receipt | MnemonError:
        """Send this request through the facade: the receipt, or the typed error raised.

        Adds go without capacity maintenance: the hot-memory model is the mutation flow's,
        where an overflow is a ``CapacityExceeded`` (maintenance has its own properties)."""
        target, content, old, importance = (
            self.target,
            self.content,
            self.old_text,
            self.importance,
        )
        try:
            if self.action == "add":
                return hot.add(target, content, importance, maintenance=False)  # type: ignore[arg-type]
            if self.action == "replace":
                return hot.replace(target, old, content, importance)  # type: ignore[arg-type]
            return hot.remove(target, old)  # type: ignore[arg-type]
        except MnemonError as exc:
            return exc

    def kwargs(self) -> dict[str, object]:
        """Keyword arguments of ``check_request`` / the reference model."""
        return {
            "action": self.action,
            "target": self.target,
            "content": self.content,
            "old_text": self.old_text,
            "importance": self.importance,
        }


@st.composite
def old_texts(draw: st.DrawFn, contents: Sequence[str]) -> object:
    """``old_text``: mostly derived from ``contents`` (whole, substring, re-spaced, re-cased),
    otherwise random text, an empty or blank string, ``§`` or None."""
    derived = bool(contents) and draw(st.integers(0, 9)) < 8
    if not derived:
        choice = draw(st.integers(0, 9))
        if choice == 0:
            return draw(st.sampled_from(("", "   ", "\u3000\ufeff", None, "a§b")))
        if choice <= 2:
            return draw(entry_texts(reserved=False, max_pieces=3))
        return draw(valid_contents(max_pieces=2))
    content = draw(st.sampled_from(list(contents)))
    how = draw(
        st.sampled_from(
            ("whole", "substring", "word", "substring", "short", "respaced", "recased")
        )
    )
    if how == "whole":
        return content
    if how == "word":  # a vocabulary word: often inside several entries (ambiguous)
        return draw(st.sampled_from([w for w in WORDS if w in content] or list(WORDS)))
    if how == "short":
        start = draw(st.integers(0, len(content) - 1))
        return content[start : start + draw(st.integers(1, 2))]
    if how == "substring":
        start = draw(st.integers(0, len(content) - 1))
        end = draw(st.integers(start + 1, len(content)))
        return content[start:end]
    if how == "respaced":
        run = draw(whitespace_runs())
        return (
            draw(whitespace_runs(0, 2)) + content.replace(" ", run) + draw(whitespace_runs(0, 2))
        )
    return content.swapcase()


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


@st.composite
def mutation_requests(
    draw: st.DrawFn,
    entries: Sequence[tuple[str, str]],
    limits: Mapping[str, int] | None = None,
    *,
    actions: Sequence[str] = ACTIONS,
    invalid: bool = True,
) -> MutationRequest:
    """A request against a store holding ``entries`` (``(target, content)`` in file order).

    ``limits`` (target -> byte limit) enables content sized to land near the target's limit:
    exactly at it, a few bytes below or above. Near-maximal entries (8192 bytes +- 2) are drawn
    too. With ``invalid`` off, targets and importances are always valid.
    """
    action = draw(st.sampled_from(list(actions)))
    target = draw(targets(invalid=invalid))
    importance = draw(importances(invalid=invalid))
    key = target if target in TARGETS else "user"
    mine = [c for t, c in entries if t == key]
    everything = [c for _, c in entries]
    old_text: object = None
    if action != "add":
        pool = mine if mine and draw(st.integers(0, 4)) > 0 else everything
        old_text = draw(old_texts(pool))
    if action == "remove":
        return MutationRequest(action, target, None, old_text)  # remove takes no importance
    used = _size(DELIMITER.join(mine))
    kind = draw(st.integers(0, 11))
    content: object
    if kind <= 5 or (kind <= 8 and limits is None):
        # fresh content, sometimes dressed in whitespace that normalization removes
        fresh = draw(valid_contents())
        if draw(st.booleans()):
            run = draw(whitespace_runs())
            fresh = (
                draw(whitespace_runs(0, 2)) + fresh.replace(" ", run) + draw(whitespace_runs(0, 2))
            )
        content = fresh
    elif kind == 6:
        content = draw(entry_texts(surrogates=True)) if invalid else draw(valid_contents())
    elif kind == 7:
        if action == "replace" and len(mine) > 1 and draw(st.booleans()):
            # turn one entry into another one of the same target
            one, other = draw(st.lists(st.sampled_from(mine), min_size=2, max_size=2, unique=True))
            old_text, content = one, other
        elif everything:  # duplicate of an entry (often of this target), maybe re-spaced
            same = draw(st.sampled_from(mine or everything))
            content = draw(st.sampled_from((same, f" {same}\u3000", same.replace(" ", "\t\n"))))
        else:
            content = draw(valid_contents())
    elif kind <= 10 and limits is not None:
        limit = limits[key]
        if action == "replace" and mine:
            # replace a whole entry (exact old_text) by one that lands near the limit
            old = draw(st.sampled_from(mine))
            old_text = old
            room = limit - (used - _size(old))
        else:
            room = limit - used - (len(DELIMITER.encode()) if mine else 0)
        wanted = max(1, min(ENTRY_MAX_BYTES + 2, room + draw(st.integers(-3, 3))))
        content = draw(sized_texts(wanted))
    else:
        content = draw(sized_texts(ENTRY_MAX_BYTES + draw(st.integers(-2, 2))))
    return MutationRequest(action, target, content, old_text, importance)
