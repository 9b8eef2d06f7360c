"""Properties of the ``memories.json`` codec, the projections and the size bookkeeping.

The specialised encoder of :class:`HotStore` must be byte-identical to ``json.dumps`` of the
unstructured document, parsing must invert it, the revision must be the SHA-256 of the compact
JSON, and ``plan_mutation``'s incremental sizes must equal sizes recomputed from scratch.
``parse_source`` must refuse (``CorruptStore``) every document that breaks the format, each
built by damaging a valid document in one place, and INV-HOT-1 (the source parses) must hold
for everything the library itself writes.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import attrs
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from mnemon_sm.config import Config
from mnemon_sm.errors import CapacityExceeded, CorruptStore, MnemonError
from mnemon_sm.flows.hot.invariants import check
from mnemon_sm.flows.hot.model import IMPORTANCES, SOURCE_PATH, TARGETS, HotStore, parse_source
from mnemon_sm.flows.hot.rules import Commit, Rejected, check_request, plan_mutation
from mnemon_sm.testing.memory import MemoryFiles
from mnemon_sm.testing.strategies import (
    JS_WHITESPACE,
    entry_texts,
    hot_stores,
    mutation_requests,
    sized_texts,
    timestamps,
    valid_contents,
)
from property_tests.model import collapse, normalized

NOW = "2026-08-13T08:00:00.000Z"
ENTRY_KEYS = ("content", "created_at", "updated_at", "target", "importance")


def reference_bytes(store: HotStore) -> bytes:
    return (json.dumps(store.unstructure(), indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def compact_sha(store: HotStore) -> str:
    compact = json.dumps(store.unstructure(), ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(compact.encode("utf-8")).hexdigest()


# -- encoding --------------------------------------------------------------------------------


@given(hot_stores())
def test_encode_is_json_dumps_byte_for_byte(store: HotStore) -> None:
    assert store.encode() == reference_bytes(store)


@given(hot_stores())
def test_parse_inverts_encode(store: HotStore) -> None:
    parsed = parse_source(store.encode())
    assert parsed == store
    assert parsed.entries == store.entries
    assert parsed.encode() == store.encode()


@given(hot_stores())
def test_encoded_source_satisfies_inv_hot_1(store: HotStore) -> None:
    files = MemoryFiles()
    files.put(SOURCE_PATH, store.encode())
    assert check(files, Config(), "INV-HOT-1") == []


@given(hot_stores())
def test_revision_is_sha256_of_compact_json(store: HotStore) -> None:
    compact = json.dumps(store.unstructure(), ensure_ascii=False, separators=(",", ":"))
    assert store.canonical() == compact.encode("utf-8")
    assert store.revision() == compact_sha(store)


@given(hot_stores(max_entries=5).filter(lambda s: len(s.entries) > 0), st.data())
def test_revision_covers_every_field(store: HotStore, data: st.DataObject) -> None:
    """Changing any one field of any one entry (or the order of entries) changes the revision."""
    entries = list(store.entries)
    index = data.draw(st.integers(0, len(entries) - 1))
    entry = entries[index]
    field = data.draw(st.sampled_from([*ENTRY_KEYS, "order"]))
    if field == "order":
        assume(len(entries) > 1)
        other = data.draw(st.integers(0, len(entries) - 1).filter(lambda i: i != index))
        entries[index], entries[other] = entries[other], entries[index]
    else:
        options = {
            "content": valid_contents(),
            "created_at": timestamps(),
            "updated_at": timestamps(),
            "target": st.sampled_from(TARGETS),
            "importance": st.sampled_from(IMPORTANCES),
        }
        value = data.draw(options[field].filter(lambda v: v != getattr(entry, field)))
        changes: dict[str, Any] = {field: value}
        entries[index] = attrs.evolve(entry, **changes)
    changed = HotStore(tuple(entries))
    assume(changed.unstructure() != store.unstructure())
    assert changed.revision() != store.revision()
    assert changed.revision() == compact_sha(changed)


@given(hot_stores())
def test_projection_is_the_joined_contents(store: HotStore) -> None:
    for target in TARGETS:
        contents = [e.content for e in store.entries if e.target == target]
        expected = ("\n§\n".join(contents) + "\n").encode("utf-8") if contents else b""
        assert store.projection(target) == expected
        assert store.used(target) == len("\n§\n".join(contents).encode("utf-8"))


@given(hot_stores(), st.data())
def test_parse_normalizes_content_like_javascript(store: HotStore, data: st.DataObject) -> None:
    """Content written with extra JavaScript whitespace reads back collapsed and trimmed."""
    doc = store.unstructure()
    for entry in doc["entries"]:
        run = data.draw(st.text(st.sampled_from(JS_WHITESPACE), min_size=1, max_size=3))
        entry["content"] = run + entry["content"].replace(" ", run) + run
    parsed = parse_source(json.dumps(doc, ensure_ascii=data.draw(st.booleans())).encode())
    assert [e.content for e in parsed.entries] == [e.content for e in store.entries]


@given(entry_texts(surrogates=True))
def test_library_normalization_agrees_with_the_model(text: str) -> None:
    """RULE-HOT-2 against the model's independent normalization (including the verdict)."""
    expected = normalized(text)
    try:
        got: str | None = check_request("add", "user", content=text).content
    except MnemonError:
        got = None
    assert got == expected, (text, collapse(text))


@given(st.integers(8188, 8196).flatmap(sized_texts))
def test_entry_size_limit_is_8192_utf8_bytes(text: str) -> None:
    size = len(collapse(text).encode("utf-8"))
    try:
        check_request("add", "memory", content=text)
        accepted = True
    except MnemonError:
        accepted = False
    assert accepted == (size <= 8192), size


# -- incremental size bookkeeping in plan_mutation -------------------------------------------


@given(hot_stores(max_entries=8), st.data())
def test_plan_mutation_sizes_equal_recomputed_sizes(store: HotStore, data: st.DataObject) -> None:
    """For a chain of commits (each planned on the previous derived store), every derived
    size, projection and receipt usage equals what a fresh store of the same entries says;
    a capacity rejection projects exactly the size the commit would have had."""
    for _ in range(data.draw(st.integers(1, 6))):
        contents = [(e.target, e.content) for e in store.entries]
        request = data.draw(mutation_requests(contents, {"user": 600, "memory": 900}))
        try:
            mutation = check_request(**request.kwargs())
        except MnemonError:
            continue
        outcome = plan_mutation(store, mutation, NOW, 1_048_576)
        if not isinstance(outcome, Commit):
            continue
        fresh = HotStore(outcome.store.entries)
        for target in TARGETS:
            joined = "\n§\n".join(e.content for e in outcome.store.entries if e.target == target)
            assert outcome.store.used(target) == len(joined.encode("utf-8")) == fresh.used(target)
            assert outcome.store.of(target) == fresh.of(target)
            assert outcome.store.projection(target) == fresh.projection(target)
        assert outcome.receipt.usage.used == fresh.used(mutation.target)
        assert outcome.receipt.entry_count == len(fresh.of(mutation.target))
        assert outcome.store.encode() == reference_bytes(fresh)
        tight = data.draw(st.integers(256, 1200))
        limited = plan_mutation(store, mutation, NOW, tight)
        if isinstance(limited, Rejected):
            assert isinstance(limited.error, CapacityExceeded)
            assert limited.error.projected == fresh.used(mutation.target)
            assert limited.error.used == store.used(mutation.target)
        else:
            assert fresh.used(mutation.target) <= max(tight, store.used(mutation.target))
        store = outcome.store


# -- strict reading ----------------------------------------------------------------------------


def _document(store: HotStore) -> dict[str, Any]:
    doc: dict[str, Any] = store.unstructure()
    return copy.deepcopy(doc)


def _rejects(doc: object) -> None:
    data = doc if isinstance(doc, bytes) else json.dumps(doc).encode("utf-8")
    with pytest.raises(CorruptStore):
        parse_source(data)


nonempty_stores = hot_stores(max_entries=5).filter(lambda s: len(s.entries) > 0)
json_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=False),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@given(hot_stores(max_entries=3), st.text(min_size=1, max_size=10), json_values)
def test_rejects_unknown_top_level_keys(store: HotStore, key: str, value: object) -> None:
    assume(key not in ("version", "entries"))
    doc = _document(store)
    doc[key] = value
    _rejects(doc)


@given(nonempty_stores, st.data(), st.text(min_size=1, max_size=10), json_values)
def test_rejects_unknown_entry_keys(
    store: HotStore, data: st.DataObject, key: str, value: object
) -> None:
    assume(key not in ENTRY_KEYS)
    doc = _document(store)
    data.draw(st.sampled_from(doc["entries"]))[key] = value
    _rejects(doc)


@given(hot_stores(max_entries=3), st.one_of(json_values, st.just(1.0), st.just(True)))
def test_rejects_a_wrong_version(store: HotStore, version: object) -> None:
    assume(not (type(version) is int and version == 1))
    doc = _document(store)
    doc["version"] = version
    _rejects(doc)


@given(hot_stores(max_entries=3), st.sampled_from(["version", "entries"]))
def test_rejects_a_missing_top_level_key(store: HotStore, key: str) -> None:
    doc = _document(store)
    del doc[key]
    _rejects(doc)


@given(hot_stores(max_entries=3), st.sampled_from([{}, "", None, 0, "entries", {"a": 1}]))
def test_rejects_entries_that_are_not_an_array(store: HotStore, entries: object) -> None:
    """Reference 8.1: ``entries`` not an array -> "must use version 1"."""
    doc = _document(store)
    doc["entries"] = entries
    _rejects(doc)


@given(st.sampled_from([[], "x", 1, None, True, "version"]))
def test_rejects_a_root_that_is_not_an_object(root: object) -> None:
    _rejects(root)


@given(nonempty_stores, st.data())
def test_rejects_bad_entry_fields(store: HotStore, data: st.DataObject) -> None:
    doc = _document(store)
    entry = data.draw(st.sampled_from(doc["entries"]))
    field = data.draw(st.sampled_from(ENTRY_KEYS))
    if data.draw(st.booleans()):
        del entry[field]
    elif field == "content":
        entry[field] = data.draw(
            st.one_of(
                json_values.filter(lambda v: not isinstance(v, str)),
                st.text(st.sampled_from(JS_WHITESPACE), max_size=4),  # blank
                st.builds(
                    lambda text, at: text[:at] + "§" + text[at:],
                    st.just(entry["content"]),
                    st.integers(0, len(entry["content"])),
                ),
                st.integers(8193, 8300).flatmap(lambda n: sized_texts(n, decorate=False)),
            )
        )
    elif field in ("target", "importance"):
        entry[field] = data.draw(
            json_values.filter(lambda v: v not in ("user", "memory", "critical", "normal", "low"))
            | st.sampled_from(["USER", "Normal", " user", "high", "memory "])
        )
    else:
        entry[field] = data.draw(json_values.filter(lambda v: not isinstance(v, str)))
    _rejects(doc)


@given(nonempty_stores, st.data())
def test_rejects_lone_surrogates_in_content(store: HotStore, data: st.DataObject) -> None:
    doc = _document(store)
    entry = data.draw(st.sampled_from(doc["entries"]))
    lone = data.draw(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF))
    entry["content"] += lone
    _rejects(doc)  # json.dumps escapes it as \\udXXX, which json.loads turns back into it


@given(hot_stores(max_entries=3), st.data())
def test_rejects_bytes_that_are_not_json_or_utf8(store: HotStore, data: st.DataObject) -> None:
    raw = store.encode()
    damage = data.draw(st.sampled_from(["truncate", "bom", "invalid-utf8", "trailing"]))
    if damage == "truncate":
        raw = raw[: data.draw(st.integers(0, len(raw) - 2))]
    elif damage == "bom":
        raw = b"\xef\xbb\xbf" + raw
    elif damage == "invalid-utf8":
        at = data.draw(st.integers(0, len(raw)))
        raw = raw[:at] + b"\xff" + raw[at:]
    else:
        raw = raw + b"{}"
    _rejects(raw)


@given(nonempty_stores, st.data(), timestamps())
def test_every_accepted_document_can_be_written_back(
    store: HotStore, data: st.DataObject, stamp: str
) -> None:
    """A timestamp holding a lone surrogate (valid JSON: ``"\\ud800"``) cannot be stored as
    UTF-8: ``parse_source`` must refuse it with ``CorruptStore`` (or return a store the next
    commit can encode), never fail with an untyped ``UnicodeEncodeError``."""
    doc = _document(store)
    entry = data.draw(st.sampled_from(doc["entries"]))
    lone = data.draw(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF))
    entry[data.draw(st.sampled_from(["created_at", "updated_at"]))] = stamp + lone
    try:
        parsed = parse_source(json.dumps(doc).encode("utf-8"))
    except CorruptStore:
        return
    parsed.encode()
    parsed.revision()
