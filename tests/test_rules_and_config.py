"""The pure mutation rules (RULE-HOT-1..6) and the configuration object."""

from __future__ import annotations

from pathlib import Path

import pytest

from mnemon_sm import Config, InvalidConfig
from mnemon_sm.errors import (
    AmbiguousMatch,
    CapacityExceeded,
    DuplicateEntry,
    InvalidInput,
    LockTimeout,
    NoMatch,
)
from mnemon_sm.flows.hot.model import HotEntry, HotStore
from mnemon_sm.flows.hot.rules import (
    Commit,
    Rejected,
    Unchanged,
    check_request,
    plan_mutation,
    verdict,
)

T0, T1 = "2026-08-13T08:00:00.000Z", "2026-08-13T09:00:00.000Z"


def store(*items: tuple[str, str]) -> HotStore:
    return HotStore(tuple(HotEntry(c, T0, T0, t) for t, c in items))  # type: ignore[arg-type]


def plan(s: HotStore, limit: int = 10240, **request: object):
    return plan_mutation(s, check_request(**request), T1, limit)


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ({"action": "add", "target": "team", "content": "x"}, "target must be memory or user"),
        ({"action": "merge", "target": "user", "content": "x"}, "action must be add, replace"),
        ({"action": "add", "target": "user", "content": "x", "importance": "high"}, "importance"),
        ({"action": "add", "target": "user"}, "content is required"),
        ({"action": "replace", "target": "user", "content": "x"}, "oldText is required"),
        ({"action": "remove", "target": "user", "old_text": "a§"}, "reserved §"),
    ],
)
def test_check_request_rejects(request_: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        check_request(**request_)


def test_add_appends_with_timestamps_and_default_importance() -> None:
    outcome = plan(store(("memory", "a")), action="add", target="memory", content=" b ")
    assert isinstance(outcome, Commit)
    assert outcome.store.entries[-1] == HotEntry("b", T1, T1, "memory", "normal")
    assert outcome.receipt.to_json() == {
        "success": True,
        "message": "Entry added.",
        "target": "memory",
        "entryCount": 2,
        "usage": {"used": 6, "limit": 10240},
        "added": "b",
    }


def test_exact_duplicate_add_is_unchanged_and_keeps_importance() -> None:
    s = store(("user", "a"))
    outcome = plan(s, action="add", target="user", content="a", importance="critical")
    assert isinstance(outcome, Unchanged)
    assert outcome.receipt.message == "Entry already exists (no duplicate added)."
    # the same text in the other target is not a duplicate
    assert isinstance(plan(s, action="add", target="memory", content="a"), Commit)


def test_capacity_example_from_the_reference() -> None:
    s = store(("user", "x" * 4090))
    outcome = plan(s, 4096, action="add", target="user", content="超出")
    assert isinstance(outcome, Rejected) and isinstance(outcome.error, CapacityExceeded)
    error = outcome.error
    assert (error.target, error.used, error.projected, error.limit) == ("user", 4090, 4100, 4096)
    assert "4100 bytes (current 4090, limit 4096)" in error.message
    fits = plan(s, 4096, action="add", target="user", content="ab")  # 4090 + 4 + 2 = 4096
    assert isinstance(fits, Commit) and fits.receipt.usage.used == 4096


def test_an_over_limit_target_may_shrink_but_not_grow() -> None:
    s = store(("user", "x" * 3000), ("user", "y" * 2000))  # 5004 bytes, limit 4096
    shrink = plan(s, 4096, action="replace", target="user", old_text="y", content="y" * 1000)
    assert isinstance(shrink, Commit) and shrink.receipt.usage.used == 4004
    grow = plan(s, 4096, action="replace", target="user", old_text="y", content="y" * 2001)
    assert isinstance(grow, Rejected)
    assert isinstance(plan(s, 4096, action="remove", target="user", old_text="x"), Commit)


@pytest.mark.parametrize(
    ("old", "error"),
    [("zzz", NoMatch), ("fact", AmbiguousMatch), ("Fact", NoMatch)],
)
def test_matching_is_one_case_sensitive_substring(old: str, error: type) -> None:
    s = store(("memory", "first fact"), ("memory", "second fact"))
    outcome = plan(s, action="remove", target="memory", old_text=old)
    assert isinstance(outcome, Rejected) and isinstance(outcome.error, error)


def test_ambiguous_match_lists_candidates_and_quotes_old_text() -> None:
    s = store(("memory", "first fact"), ("memory", "second fact"), ("user", "fact"))
    outcome = plan(s, action="remove", target="memory", old_text='fa"ct'.replace('"', ""))
    assert isinstance(outcome, Rejected) and isinstance(outcome.error, AmbiguousMatch)
    assert outcome.error.candidates == ("first fact", "second fact")
    assert outcome.error.message == (
        'Multiple memory entries contain "fact"; use a unique substring.'
    )
    missing = plan(s, action="remove", target="memory", old_text='say "hi"')
    assert isinstance(missing, Rejected)
    assert missing.error.message == 'No memory entry contains "say \\"hi\\"".'


def test_an_exact_whole_entry_match_wins_over_longer_ones() -> None:
    s = store(("memory", "pnpm"), ("memory", "pnpm workspaces"))
    outcome = plan(s, action="remove", target="memory", old_text="pnpm")
    assert isinstance(outcome, Commit)
    assert [e.content for e in outcome.store.entries] == ["pnpm workspaces"]


def test_replace_keeps_position_and_creation_time_and_may_change_importance() -> None:
    s = store(("memory", "a"), ("memory", "b"), ("memory", "c"))
    outcome = plan(
        s, action="replace", target="memory", old_text="b", content="B", importance="low"
    )
    assert isinstance(outcome, Commit)
    assert outcome.store.entries[1] == HotEntry("B", T0, T1, "memory", "low")
    assert [e.content for e in outcome.store.entries] == ["a", "B", "c"]
    assert outcome.receipt.to_json()["replaced"] == {"from": "b", "to": "B"}
    kept = plan(s, action="replace", target="memory", old_text="c", content="C")
    assert isinstance(kept, Commit) and kept.store.entries[2].importance == "normal"


def test_replace_may_not_duplicate_another_entry() -> None:
    s = store(("memory", "a"), ("memory", "b"))
    outcome = plan(s, action="replace", target="memory", old_text="a", content=" b ")
    assert isinstance(outcome, Rejected) and isinstance(outcome.error, DuplicateEntry)
    same = plan(s, action="replace", target="memory", old_text="a", content="a")
    assert isinstance(same, Commit)  # replacing an entry with itself is allowed


def test_remove_receipt() -> None:
    s = store(("user", "a"), ("user", "b"))
    outcome = plan(s, action="remove", target="user", old_text="a")
    assert isinstance(outcome, Commit)
    assert outcome.receipt.to_json() == {
        "success": True,
        "message": "Entry removed.",
        "target": "user",
        "entryCount": 1,
        "usage": {"used": 1, "limit": 10240},
        "removed": "a",
    }


def test_the_verdict_names_the_edge_a_plan_takes_and_a_failure_wins() -> None:
    s = store(("user", "a"))
    committing = plan(s, action="add", target="user", content="b")
    duplicate = plan(s, action="add", target="user", content="a")
    rejected = plan(s, action="remove", target="user", old_text="zzz")
    assert verdict(committing, None) == "commit"
    assert verdict(duplicate, None) == "duplicate"
    assert verdict(rejected, None) == "rejected"
    for outcome in (None, committing, duplicate, rejected):
        assert verdict(outcome, LockTimeout("held")) == "failed"
    assert verdict(None, None) is None  # nothing decided: no edge holds


# -- configuration ---------------------------------------------------------------------------


def test_config_defaults_match_the_reference() -> None:
    c = Config()
    assert (c.recall_mode, c.writeback_mode) == ("guided", "guided")
    assert c.lifecycle_enabled and c.routing_guidance and c.write_enabled
    assert (c.idle_review_ms, c.user_limit, c.memory_limit) == (30000, 4096, 10240)
    assert c.durability == "full" and c.lock_timeout_ms == 5000
    assert c.limit("user") == 4096 and c.limit("memory") == 10240


def test_config_from_toml_uses_camel_case(tmp_path: Path) -> None:
    path = tmp_path / "mnemon.toml"
    path.write_text('writeEnabled = false\nrecallMode = "off"\nidleReviewMs = 6000\n')
    c = Config.from_toml(path, durability="off")
    assert (c.write_enabled, c.recall_mode, c.idle_review_ms, c.durability) == (
        False,
        "off",
        6000,
        "off",
    )


@pytest.mark.parametrize(
    "toml",
    [
        "idleReviewMs = 1",
        'recallMode = "sometimes"',
        'writeEnabled = "false"',
        "userLimit = 4096.5",
        "colour = 1",
        "memoryLimit = true",
        'durability = "paranoid"',
        "lockTimeoutMs = 0",
        "not toml",
    ],
)
def test_bad_toml_values_are_rejected(tmp_path: Path, toml: str) -> None:
    path = tmp_path / "mnemon.toml"
    path.write_text(toml + "\n")
    with pytest.raises(InvalidConfig):
        Config.from_toml(path)


@pytest.mark.parametrize(
    "values",
    [{"write_enabled": 0}, {"user_limit": "4096"}, {"idle_review_ms": 4999}, {"colour": 1}],
)
def test_bad_keyword_values_are_rejected(values: dict[str, object]) -> None:
    with pytest.raises(InvalidConfig):
        Config.of(**values)


def test_missing_config_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfig, match="cannot read config file"):
        Config.from_toml(tmp_path / "absent.toml")
