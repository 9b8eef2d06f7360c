"""Pure rules at their boundaries: whitespace, sizes, timestamps, the memories.json format."""

from __future__ import annotations

import hashlib
import json
import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mnemon_sm.errors import CorruptStore, InvalidInput
from mnemon_sm.flows.hot.model import HotEntry, HotStore, normalize, parse_source
from mnemon_sm.text import (
    WHITESPACE,
    collapse_whitespace,
    iso_ms,
    strip_whitespace,
    utf8_len,
    utf16_len,
)

# Every character of the JavaScript whitespace class, ranges expanded.
_JS_SPACES = "".join(c for c in map(chr, range(0x3001)) if re.fullmatch(f"[{WHITESPACE}]", c))
_JS_SPACES += "\ufeff"

T = "2026-08-13T08:00:00.000Z"

REFERENCE_DOC = """{
  "version": 1,
  "entries": [
    {
      "content": "User prefers concise Chinese replies",
      "created_at": "2026-08-13T08:00:00.000Z",
      "updated_at": "2026-08-13T08:00:00.000Z",
      "target": "user",
      "importance": "critical"
    },
    {
      "content": "Release checks run with pnpm verify",
      "created_at": "2026-08-13T08:00:00.000Z",
      "updated_at": "2026-08-13T08:00:00.000Z",
      "target": "memory",
      "importance": "normal"
    }
  ]
}
"""


@pytest.mark.parametrize(
    ("raw", "collapsed"),
    [
        ("  a  b  ", "a b"),
        ("\ufeffa\u3000\u00a0b\u2028", "a b"),  # JavaScript whitespace
        ("a\x1cb\x85c", "a\x1cb\x85c"),  # Python whitespace that JavaScript keeps
        ("\t\n\v\f\r", ""),
        ("a\u200bb", "a\u200bb"),  # zero-width space is not whitespace
    ],
)
def test_collapse_uses_the_javascript_whitespace_class(raw: str, collapsed: str) -> None:
    assert collapse_whitespace(raw) == collapsed


@example("a  b")
@example(" \u00a0a")
@example("a\tb")
@given(st.text(alphabet=st.sampled_from(list(" ab\x1c\x85\u200b" + _JS_SPACES)) | st.characters()))
def test_collapse_equals_the_regex_of_the_class(raw: str) -> None:
    """The quick path (printable text without a double space) changes nothing: the result is
    always the regex's, written from the JavaScript class."""
    expected = re.sub(f"[{WHITESPACE}]+", " ", raw).strip(" ")
    assert collapse_whitespace(raw) == expected


def test_every_javascript_space_but_the_ascii_one_is_unprintable() -> None:
    assert [c for c in _JS_SPACES if c.isprintable()] == [" "]


def test_strip_leaves_inner_runs() -> None:
    assert strip_whitespace("\u3000 a  b \ufeff") == "a  b"


def test_sizes_and_timestamps() -> None:
    assert utf8_len("超出") == 6 and utf16_len("超出") == 2
    assert utf8_len("😀") == 4 and utf16_len("😀") == 2
    assert iso_ms(1_786_608_000_000) == T
    assert iso_ms(1_786_608_000_007) == "2026-08-13T08:00:00.007Z"
    assert iso_ms(0) == "1970-01-01T00:00:00.000Z"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (None, "content is required"),
        ("  \u3000 ", "content is required"),
        ("a § b", "reserved § entry delimiter"),
        ("x" * 8193, "too large (8193 bytes; max 8192)"),
        ("é" * 4097, "too large (8194 bytes; max 8192)"),
        ("\ud800", "valid Unicode"),
        (42, "must be a string"),
    ],
)
def test_normalize_rejects(value: object, message: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape(message)):
        normalize(value, "content")


def test_normalize_accepts_the_exact_cap() -> None:
    assert normalize("x" * 8192, "content") == "x" * 8192
    assert normalize(" 😀 ", "content") == "😀"


def test_reference_document_round_trips_byte_for_byte() -> None:
    store = parse_source(REFERENCE_DOC.encode())
    assert store.encode() == REFERENCE_DOC.encode()
    assert [e.target for e in store.entries] == ["user", "memory"]
    canonical = json.dumps(json.loads(REFERENCE_DOC), ensure_ascii=False, separators=(",", ":"))
    assert store.canonical() == canonical.encode()
    assert store.revision() == hashlib.sha256(canonical.encode()).hexdigest()


def test_empty_store_formats() -> None:
    store = HotStore()
    assert store.encode() == b'{\n  "version": 1,\n  "entries": []\n}\n'
    assert store.projection("user") == b"" and store.used("user") == 0
    assert parse_source(None) == store
    assert parse_source(store.encode()) == store


def test_projection_and_capacity_metric() -> None:
    entries = (
        HotEntry("Project uses pnpm workspaces", T, T, "memory"),
        HotEntry("a user fact", T, T, "user"),
        HotEntry("Release checks run with pnpm verify", T, T, "memory"),
    )
    store = HotStore(entries)
    assert store.projection("memory") == (
        b"Project uses pnpm workspaces\n\xc2\xa7\nRelease checks run with pnpm verify\n"
    )
    assert store.used("memory") == 28 + 4 + 35
    assert store.projection("user") == b"a user fact\n"


def test_non_ascii_is_written_unescaped_like_javascript() -> None:
    store = HotStore((HotEntry('超出 "quoted" \\ tab', T, T, "user", "low"),))
    assert '"content": "超出 \\"quoted\\" \\\\ tab"' in store.encode().decode()


def test_content_is_normalized_on_read() -> None:
    doc = json.loads(REFERENCE_DOC)
    doc["entries"][0]["content"] = "  spaced \t out  "
    store = parse_source(json.dumps(doc).encode())
    assert store.entries[0].content == "spaced out"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(version=2), "version 1"),
        (lambda d: d.pop("entries"), "required field missing"),
        (lambda d: d.update(extra=True), "unknown field"),
        (lambda d: d["entries"][0].update(branch="main"), "unknown field"),
        (lambda d: d["entries"][0].update(content=7), "expected a string"),
        (lambda d: d["entries"][0].update(target="team"), r"\$\.entries\[0\]\.target"),
        (lambda d: d["entries"][1].update(importance="high"), "importance"),
        (lambda d: d["entries"][1].pop("created_at"), "required field missing"),
        (lambda d: d["entries"][1].update(content="a § b"), r"invalid entry at \$\.entries\[1\]"),
        (lambda d: d["entries"][1].update(content=" "), "content is required"),
    ],
)
def test_invalid_documents_are_corrupt_and_name_the_problem(mutate, message: str) -> None:
    doc = json.loads(REFERENCE_DOC)
    mutate(doc)
    with pytest.raises(CorruptStore, match=message) as caught:
        parse_source(json.dumps(doc).encode())
    assert caught.value.path == "runtime/memories.json"


@pytest.mark.parametrize("data", [b"", b"{not json", b"\xff\xfe", b"[]", b"null", b'"x"'])
def test_unparseable_documents_are_corrupt(data: bytes) -> None:
    with pytest.raises(CorruptStore):
        parse_source(data)


def test_a_hot_run_copy_changes_only_what_it_names() -> None:
    """``HotRun.but`` is ``attrs.evolve`` by hand: every field is carried over."""
    import attrs as _attrs

    from mnemon_sm.flows.hot.mutation import HotRun

    names = [f.name for f in _attrs.fields(HotRun)]
    full = HotRun(**{name: object() for name in names})
    for name in names:
        changed = full.but(**{name: None})
        assert changed == _attrs.evolve(full, **{name: None})


def test_iso_ms_agrees_with_datetime_across_seconds_in_any_order() -> None:
    """The last second's text is reused: calls in the same second, the next one, an earlier
    one and far away must all match an oracle built on datetime."""
    from datetime import UTC, datetime

    def oracle(ms: int) -> str:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + (
            f"{ms % 1000:03d}Z"
        )

    base = 1_786_608_000_000
    for ms in [
        base,
        base + 1,
        base + 999,
        base + 1000,
        base - 1,
        base,
        0,
        4_102_444_799_999,
        base + 59_999,
        base + 60_000,
        base + 86_400_000,
    ]:
        assert iso_ms(ms) == oracle(ms), ms


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ([], []),
        ([], [("x", "memory")]),  # an empty target against one entry
        ([("a", "memory")], [("a", "memory")]),
        ([("a", "memory")], [("b", "memory")]),
        ([("a", "memory"), ("b", "memory")], [("a", "memory")]),
        ([("a", "memory"), ("u", "user")], [("a", "memory")]),  # the other target differs
        ([("ab", "memory")], [("a", "memory"), ("b", "memory")]),
    ],
)
def test_same_projection_agrees_with_comparing_the_files(
    left: list[tuple[str, str]], right: list[tuple[str, str]]
) -> None:
    def store(items: list[tuple[str, str]]) -> HotStore:
        return HotStore(tuple(HotEntry(c, T, T, t) for c, t in items))  # type: ignore[arg-type]

    a, b = store(left), store(right)
    for target in ("memory", "user"):
        assert a.same_projection(b, target) == (a.projection(target) == b.projection(target))
