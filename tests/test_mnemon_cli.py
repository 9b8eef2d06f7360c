"""The Mnemon CLI adapter (``longterm.mnemon.MnemonCliStore``) against child processes.

Two kinds of executables stand in for the real ``mnemon``: the fake of
``mnemon_sm.testing.fake_mnemon`` (Mnemon's CLI contract over the embedded store, logging
every argv it receives), and tiny scripts that print what the test tells them (payload shapes,
failures, sleeps, floods).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

from mnemon_sm.adapters import select
from mnemon_sm.adapters.mnemon import KILL_GRACE_S, MnemonCliStore, parse_viz_html, viz
from mnemon_sm.adapters.mnemon import store as mnemon_store
from mnemon_sm.adapters.select import open_long_term
from mnemon_sm.adapters.sqlite import EmbeddedStore
from mnemon_sm.config import Config
from mnemon_sm.errors import (
    InvalidConfig,
    InvalidInput,
    StorageError,
    UnknownInsight,
    UnknownSpace,
)
from mnemon_sm.ports.long_term.values import Capabilities, DraftEdge, DraftInsight, ImportDraft
from mnemon_sm.testing.contract import check_long_term_contract
from mnemon_sm.testing.fake_mnemon import install
from mnemon_sm.testing.memory import FakeClock


@attrs.define
class Fake:
    """A root served by the fake mnemon, with the argv log of every call."""

    root: Path
    exe: Path
    log: Path
    store: MnemonCliStore

    def calls(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text("utf-8").splitlines()]

    def argvs(self) -> list[list[str]]:
        return [call["argv"] for call in self.calls()]

    def last(self) -> list[str]:
        return self.argvs()[-1]

    def clear(self) -> None:
        self.log.unlink(missing_ok=True)

    def g(self, space: str | None = "default", *, readonly: bool = False) -> list[str]:
        """The global flags the adapter must put first."""
        out = ["--data-dir", str(self.root)]
        if space is not None:
            out += ["--store", space]
        return out + (["--readonly"] if readonly else [])


def make_fake(tmp_path: Path, *, verbose: bool = False, **env: str) -> Fake:
    log = tmp_path / "argv.log"
    variables = {"FAKE_MNEMON_ARGV_LOG": str(log), **env}
    if verbose:
        variables["FAKE_MNEMON_VERBOSE"] = "1"
    bin_dir = tmp_path / ("bin-verbose" if verbose else "bin")
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = install(bin_dir, env=variables)
    root = tmp_path / "root"
    return Fake(root, exe, log, MnemonCliStore(root, str(exe), timeout_ms=30_000))


@pytest.fixture
def fake(tmp_path: Path) -> Fake:
    return make_fake(tmp_path)


@pytest.fixture
def seeded(fake: Fake) -> Fake:
    fake.store.create_space("default")
    fake.clear()
    return fake


def script(path: Path, body: str) -> str:
    """An executable Python script (no shell) with ``body``."""
    path.write_text(f"#!{sys.executable}\n{body}", "utf-8")
    path.chmod(0o755)
    return str(path)


SCRIPTED = """import json, os, sys
log = os.environ.get("SCRIPTED_LOG")
if log:
    with open(log, "a") as f:
        f.write(json.dumps(sys.argv[1:]) + "\\n")
sys.stdout.write(os.environ.get("SCRIPTED_STDOUT", ""))
sys.stderr.write(os.environ.get("SCRIPTED_STDERR", ""))
sys.exit(int(os.environ.get("SCRIPTED_CODE", "0")))
"""


@attrs.define
class Scripted:
    """A store whose mnemon prints ``SCRIPTED_STDOUT``/``_STDERR`` and exits ``_CODE``."""

    root: Path
    store: MnemonCliStore
    monkeypatch: pytest.MonkeyPatch

    def answer(self, stdout: Any = "", *, stderr: str = "", code: int = 0) -> None:
        text = stdout if isinstance(stdout, str) else json.dumps(stdout)
        self.monkeypatch.setenv("SCRIPTED_STDOUT", text)
        self.monkeypatch.setenv("SCRIPTED_STDERR", stderr)
        self.monkeypatch.setenv("SCRIPTED_CODE", str(code))


def empty_space(root: Path, space: str = "default") -> None:
    """A store directory as ``spaces()`` sees it (an empty SQLite file: no tables)."""
    (root / "data" / space).mkdir(parents=True)
    (root / "data" / space / "mnemon.db").touch()


@pytest.fixture
def scripted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Scripted:
    root = tmp_path / "root"
    empty_space(root)
    exe = script(tmp_path / "mnemon", SCRIPTED)
    return Scripted(root, MnemonCliStore(root, exe, timeout_ms=30_000), monkeypatch)


ROW = {
    "id": "i-1",
    "content": "the cache is warm",
    "category": "fact",
    "importance": 4,
    "tags": ["ops"],
    "entities": ["Redis"],
    "source": "agent",
    "access_count": 2,
    "created_at": "2026-01-01T00:00:00Z",
    "updated_at": "2026-01-02T00:00:00Z",
}


# -- argv -----------------------------------------------------------------------------------


def test_every_write_puts_global_flags_first_and_text_after_double_dash(fake: Fake) -> None:
    store = fake.store
    store.create_space("default")
    assert fake.last() == [*fake.g(), "store", "create", "--", "default"]
    first = store.remember(
        "default",
        "--rf is not a flag",
        category="fact",
        importance=4,
        tags=("ops", "shell"),
        entities=("Bash",),
        source="agent",
    )
    assert fake.last() == [
        *fake.g(),
        "remember",
        "--cat",
        "fact",
        "--imp",
        "4",
        "--source",
        "agent",
        "--tags",
        "ops,shell",
        "--entities",
        "Bash",
        "--",
        "--rf is not a flag",
    ]
    assert [i.content for i in store.list("default")] == ["--rf is not a flag"]
    second = store.remember("default", "-v prints the version")
    assert fake.last()[-8:] == [
        "--cat",
        "general",
        "--imp",
        "3",
        "--source",
        "user",
        "--",
        "-v prints the version",
    ]
    store.link("default", first.id, second.id, edge_type="causal", weight=0.25, reason="-why")
    assert fake.last() == [
        *fake.g(),
        "link",
        "--type",
        "causal",
        "--weight",
        "0.25",
        "--meta",
        '{"reason": "-why"}',
        "--",
        first.id,
        second.id,
    ]
    store.link("default", first.id, second.id)
    assert fake.last() == [
        *fake.g(),
        "link",
        "--type",
        "semantic",
        "--weight",
        "0.5",
        "--",
        first.id,
        second.id,
    ]
    store.forget("default", second.id)
    assert fake.last() == [*fake.g(), "forget", "--", second.id]
    report = store.import_draft("default", ImportDraft((DraftInsight("imported"),)))
    assert report.imported == 1
    argv = fake.last()
    assert argv[:-1] == [*fake.g(), "import", "--"] and argv[-1].endswith(".json")


def test_every_read_puts_global_flags_first_and_text_after_double_dash(seeded: Fake) -> None:
    store = seeded.store
    node = store.remember("default", "alpha beta").id
    store.status("default")
    assert seeded.last() == [*seeded.g(), "status"]
    store.recall("default", "-alpha", limit=7, category="fact", source="user", intent="WHY")
    assert seeded.last() == [
        *seeded.g(),
        "recall",
        "--limit",
        "7",
        "--cat",
        "fact",
        "--source",
        "user",
        "--intent",
        "WHY",
        "--",
        "-alpha",
    ]
    store.recall("default", "alpha", mode="basic", limit=3, readonly=True)
    assert seeded.last() == [
        *seeded.g(readonly=True),
        "recall",
        "--basic",
        "--limit",
        "3",
        "--",
        "alpha",
    ]
    store.recall("default", "alpha", mode="keyword", limit=4)
    assert seeded.last() == [*seeded.g(), "search", "--limit", "4", "--", "alpha"]
    store.list("default")
    assert seeded.last() == [
        *seeded.g(readonly=True),
        "recall",
        "--basic",
        "--limit",
        "100000",
        "--",
        "",
    ]
    store.list("default", query="-x", category="fact", limit=5)
    assert seeded.last() == [
        *seeded.g(readonly=True),
        "recall",
        "--basic",
        "--limit",
        "5",
        "--cat",
        "fact",
        "--",
        "-x",
    ]
    store.related("default", node, depth=3, edge_type="entity")
    assert seeded.last() == [
        *seeded.g(),
        "related",
        "--depth",
        "3",
        "--edge",
        "entity",
        "--",
        node,
    ]
    assert len(seeded.argvs()) == 8, "completing rows reads mnemon.db, no process"
    store.graph("default")
    assert len(seeded.argvs()) == 8, "the graph reads mnemon.db, no process"


def test_an_empty_recall_query_stays_one_argument(seeded: Fake) -> None:
    store = seeded.store
    a = store.remember("default", "first", importance=2).id
    b = store.remember("default", "second", importance=5).id
    for mode in ("relevance", "smart", "basic"):  # relevance is Mnemon's smart recall here
        result = store.recall("default", "", mode=mode, readonly=True)
        assert seeded.last()[-2:] == ["--", ""]
        assert {h.insight.id for h in result.hits} == {a, b}
    assert [i.id for i in store.list("default")] == [b, a]
    assert seeded.last()[-2:] == ["--", ""]


def test_text_reaches_mnemon_verbatim_without_a_shell(seeded: Fake, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    content = f"`touch {marker}` $(touch {marker}); touch {marker} | cat > {marker} && * ~ \\'\""
    seeded.store.remember("default", content)
    assert seeded.last()[-1] == content
    assert [i.content for i in seeded.store.list("default")] == [content]
    assert not marker.exists()


def test_the_child_gets_a_closed_stdin(tmp_path: Path) -> None:
    empty_space(tmp_path)
    exe = script(
        tmp_path / "reader",
        "import json, sys\nprint(json.dumps({'total_insights': len(sys.stdin.read())}))\n",
    )
    assert MnemonCliStore(tmp_path, exe, timeout_ms=5_000).status("default").total_insights == 0


def test_version_runs_without_global_flags(fake: Fake) -> None:
    assert fake.store.version() == "0.2.3"
    assert fake.last() == ["--version"]


def test_spaces_come_from_disk_without_a_call(fake: Fake) -> None:
    assert fake.store.spaces() == ()
    empty_space(fake.root, "b-2")
    empty_space(fake.root, "a1")
    (fake.root / "data" / "not a store").mkdir()
    (fake.root / "data" / "nodb").mkdir()
    assert fake.store.spaces() == ("a1", "b-2")
    assert fake.calls() == []


def test_delete_space_names_another_store_and_refuses_the_last(fake: Fake) -> None:
    store = fake.store
    for space in ("a", "b", "c"):
        store.create_space(space)
    (fake.root / "active").write_text("c\n")
    store.delete_space("a")
    assert fake.last() == [*fake.g("c"), "store", "remove", "--", "a"]
    store.delete_space("c")  # the pointer names the deleted store: any other one
    assert fake.last() == [*fake.g("b"), "store", "remove", "--", "c"]
    assert store.spaces() == ("b",)
    fake.clear()
    with pytest.raises(InvalidInput, match="only store"):
        store.delete_space("b")
    with pytest.raises(UnknownSpace):
        store.delete_space("zz")
    assert fake.calls() == [] and store.spaces() == ("b",)


def test_missing_spaces_and_bad_arguments_fail_before_any_process(seeded: Fake) -> None:
    store = seeded.store
    with pytest.raises(UnknownSpace):
        store.status("nope")
    with pytest.raises(UnknownSpace):
        store.remember("nope", "x")
    with pytest.raises(InvalidInput):
        store.status("../escape")
    with pytest.raises(InvalidInput):
        store.create_space("default")  # exists
    with pytest.raises(InvalidInput, match="comma"):
        store.remember("default", "x", entities=("a,b",))
    with pytest.raises(InvalidInput, match="NUL"):
        store.remember("default", "x\0y")
    with pytest.raises(InvalidInput):
        store.remember("default", "x", importance=9)
    with pytest.raises(InvalidInput):
        store.link("default", "same", "same")
    with pytest.raises(InvalidInput):
        store.recall("default", "x", mode="fuzzy")
    with pytest.raises(InvalidInput):
        store.import_draft("default", ImportDraft(()))
    assert seeded.calls() == []


def test_constructor_checks_its_arguments(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput):
        MnemonCliStore(tmp_path, "")
    with pytest.raises(InvalidInput):
        MnemonCliStore(tmp_path, "mnemon", timeout_ms=0)
    with pytest.raises(InvalidInput):
        MnemonCliStore(tmp_path, "mnemon", output_cap=True)
    assert MnemonCliStore(tmp_path, "mnemon").capabilities == Capabilities()


def test_a_missing_executable_is_a_storage_error(tmp_path: Path) -> None:
    empty_space(tmp_path)
    store = MnemonCliStore(tmp_path, str(tmp_path / "no-such-mnemon"))
    with pytest.raises(StorageError, match="could not be started"):
        store.status("default")


# -- parsing --------------------------------------------------------------------------------


def test_both_recall_shapes_give_the_same_hits(tmp_path: Path) -> None:
    compact = make_fake(tmp_path)
    verbose = make_fake(tmp_path, verbose=True)
    compact.store.create_space("default")
    for text, tags in (("the deploy script", ("ops",)), ("deploy on tuesdays", ("cal", "ops"))):
        compact.store.remember("default", text, tags=tags, entities=("Deploy",))
    raw = {}
    for name, fake in (("compact", compact), ("verbose", verbose)):
        argv = [str(fake.exe), *fake.g(readonly=True), "recall", "--limit", "5", "--", "deploy"]
        raw[name] = json.loads(subprocess.run(argv, capture_output=True, check=True).stdout)
    assert "meta" in raw["verbose"] and "insight" in raw["verbose"]["results"][0]
    assert "meta" not in raw["compact"] and "tags" not in raw["compact"]["results"][0]
    one = compact.store.recall("default", "deploy", limit=5, readonly=True)
    other = verbose.store.recall("default", "deploy", limit=5, readonly=True)
    assert one == other and len(one.hits) == 2
    assert {h.insight.tags for h in one.hits} == {("ops",), ("cal", "ops")}, "completed rows"
    assert all(h.insight.created_at and h.insight.entities == ("Deploy",) for h in one.hits)
    assert all(h.score is not None and h.matched_via and h.confidence for h in one.hits)
    counted = verbose.store.recall("default", "deploy", limit=5)
    assert all(h.insight.access_count == 1 for h in counted.hits)
    counted = compact.store.recall("default", "deploy", limit=5)
    assert all(h.insight.access_count == 2 for h in counted.hits), "counts after the recall"


def test_old_verbose_shape_with_via_and_meta_hint(scripted: Scripted) -> None:
    scripted.answer(
        {
            "results": [
                {
                    "insight": ROW,
                    "score": 0.7,
                    "intent": "WHY",
                    "via": "causal",
                    "signals": {"keyword": 0.5, "entity": 0.0, "similarity": 0.0, "graph": 1.0},
                },
                {"insight": {**ROW, "id": "i-2"}, "score": 0.1, "via": "recency"},
            ],
            "meta": {"intent": "WHY", "intent_source": "detected", "hint": "sparse_results"},
        }
    )
    result = scripted.store.recall("default", "why")
    assert result.hint == "sparse_results"
    first, second = result.hits
    assert first.insight.to_json() == ROW
    assert (first.score, first.intent, first.matched_via, first.confidence) == (
        0.7,
        "WHY",
        "causal",
        "high",
    )
    assert (second.intent, second.matched_via, second.confidence) == ("WHY", "recency", "low")


def test_compact_rows_keep_what_was_printed_when_the_database_cannot_be_read(
    scripted: Scripted,
) -> None:
    scripted.answer(
        {
            "results": [
                {
                    "id": "i-9",
                    "content": "c",
                    "category": "fact",
                    "importance": 2,
                    "intent": "GENERAL",
                    "matched_via": "keyword",
                    "confidence": "medium",
                    "score": 0.4,
                    "superseded": False,
                }
            ]
        }
    )
    (hit,) = scripted.store.recall("default", "c").hits
    assert hit.insight.to_json() == {
        **dict.fromkeys(("created_at", "updated_at"), ""),
        "id": "i-9",
        "content": "c",
        "category": "fact",
        "importance": 2,
        "tags": [],
        "entities": [],
        "source": "user",
        "access_count": 0,
    }
    assert (hit.score, hit.matched_via, hit.confidence) == (0.4, "keyword", "medium")


def test_basic_and_search_arrays(scripted: Scripted) -> None:
    scripted.answer([ROW, {**ROW, "id": "i-2"}])
    result = scripted.store.recall("default", "x", mode="basic", limit=3)
    assert next(h.insight for h in result.hits).to_json() == ROW
    assert all(h.score is None and h.matched_via is None for h in result.hits)
    assert result.hint is None, "2 of 3 is not sparse"
    scripted.answer([{"id": "i-3", "content": "x", "category": "fact", "importance": 1,
                      "tags": ["t"], "score": 0.2}])  # fmt: skip
    result = scripted.store.recall("default", "x", mode="keyword", limit=4)
    (hit,) = result.hits
    assert (hit.score, hit.matched_via, hit.confidence, hit.intent) == (
        0.2,
        "keyword",
        "low",
        None,
    )
    assert hit.insight.tags == ("t",) and result.hint == "sparse_results"


def test_related_rows_normalise_every_via_spelling(scripted: Scripted) -> None:
    rows = [
        {"id": "a", "content": "x", "depth": 1, "via_edge_type": "entity"},
        {"id": "b", "content": "y", "depth": 2, "via": "temporal"},
        {"id": "c", "content": "z", "depth": 2, "matched_via": "causal"},
    ]
    scripted.answer(rows)
    hits = scripted.store.related("default", "start", depth=2)
    assert [(h.insight.id, h.depth, h.via_edge_type) for h in hits] == [
        ("a", 1, "entity"),
        ("b", 2, "temporal"),
        ("c", 2, "causal"),
    ]


def test_receipts_and_status(scripted: Scripted) -> None:
    store = scripted.store
    receipt = {**ROW, "action": "skipped", "replaced_id": "old", "edges_created": {"entity": 2}}
    scripted.answer(receipt)
    got = store.remember("default", "x")
    assert (got.id, got.replaced_id, got.action, got.edges_created) == (
        "old",
        "old",
        "skipped",
        {"entity": 2},
    )
    scripted.answer({**receipt, "replaced_id": None})
    assert store.remember("default", "x").id == "i-1", "no replaced_id: the printed id"
    scripted.answer({**receipt, "action": "updated", "replaced_id": "old"})
    got = store.remember("default", "x")
    assert (got.id, got.action, got.replaced_id) == ("i-1", "added", "old"), "0.1.x update"
    scripted.answer(
        {"status": "linked", "source_id": "a", "target_id": "b", "edge_type": "causal",
         "weight": 0.3, "metadata": {"reason": "r", "created_by": "mnemon"}}
    )  # fmt: skip
    link = store.link("default", "a", "b", edge_type="causal", weight=0.3, reason="r")
    assert link.metadata == {"reason": "r", "created_by": "mnemon"} and link.weight == 0.3
    scripted.answer({"id": "a", "status": "deleted", "message": "gone"})
    assert store.forget("default", "a").id == "a"
    status = {
        "total_insights": 3,
        "deleted_insights": 1,
        "by_category": {"fact": 2, "general": 1},
        "edge_count": 4,
        "top_entities": [{"entity": "Redis", "count": 2}, ["Go", 1]],
        "oplog_count": 9,
        "db_path": "/x/mnemon.db",
        "db_size_bytes": 4096,
    }
    scripted.answer(status)
    got_status = store.status("default")
    assert got_status.top_entities == (("Redis", 2), ("Go", 1))
    assert got_status.to_json() == {**status, "top_entities": [
        {"entity": "Redis", "count": 2}, {"entity": "Go", "count": 1}]}  # fmt: skip
    scripted.answer(
        {"imported": 1, "updated": 0, "skipped": 1, "errors": 0, "edges_inserted": 1,
         "auto_pruned": 0, "results": [
             {"index": 1, "id": "fresh", "action": "skipped", "replaced_id": "kept"},
             {"index": 0, "id": "new", "action": "added"}]}
    )  # fmt: skip
    report = store.import_draft("default", ImportDraft((DraftInsight("a"), DraftInsight("b"))))
    assert report.ids == ("new", "kept") and (report.imported, report.skipped) == (1, 1)


@pytest.mark.parametrize(
    ("stdout", "match"),
    [
        ("not json", "returned invalid JSON"),
        ('{"results": 3}', "unexpected JSON"),
        ('[{"content": "no id"}]', "unexpected JSON"),
        ('[{"id": "a", "tags": "oops"}]', "unexpected JSON"),
    ],
)
def test_bad_output_is_a_storage_error(scripted: Scripted, stdout: str, match: str) -> None:
    scripted.answer(stdout)
    with pytest.raises(StorageError, match=match):
        scripted.store.recall("default", "x", mode="basic")


def test_skipped_remember_returns_the_existing_id(seeded: Fake) -> None:
    store = seeded.store
    first = store.remember("default", "same words")
    again = store.remember("default", "same words")
    assert (again.action, again.id, again.replaced_id) == ("skipped", first.id, first.id)
    argv = [str(seeded.exe), *seeded.g(), "remember", "--", "same words"]
    raw = json.loads(subprocess.run(argv, capture_output=True, check=True).stdout)
    assert raw["action"] == "skipped" and raw["replaced_id"] == first.id
    assert raw["id"] != first.id, "the fake keeps Mnemon's quirk, so the adapter is tested"
    assert [i.id for i in store.list("default")] == [first.id]


# -- failures -------------------------------------------------------------------------------


def test_missing_insights_are_unknown_insight(seeded: Fake) -> None:
    store = seeded.store
    a = store.remember("default", "one").id
    b = store.remember("default", "two").id
    store.forget("default", b)
    with pytest.raises(UnknownInsight, match="mnemon forget exited 1"):
        store.forget("default", b)
    with pytest.raises(UnknownInsight):
        store.forget("default", "never-was")
    with pytest.raises(UnknownInsight):
        store.link("default", a, b)
    with pytest.raises(UnknownInsight):
        store.related("default", b)


@pytest.mark.parametrize(
    ("stderr", "stdout", "error", "op"),
    [
        ("Error: invalid importance 9: must be 1-5\n", "", InvalidInput, "remember"),
        ("Error: content exceeds 8000 bytes\n", "", InvalidInput, "remember"),
        ('Error: store "default" does not exist\n', "", UnknownSpace, "status"),
        ("Error: insight abc not found\n", "", UnknownInsight, "forget"),
        ("Error: insight abc not found\n", "", StorageError, "status"),
        ("Error: database is locked (SQLITE_BUSY)\n", "", StorageError, "remember"),
        ("Error: unknown flag: --verbose\n", "", StorageError, "status"),
        ("", "Error: insight is deleted\n", UnknownInsight, "related"),
    ],
)
def test_non_zero_exits_become_typed_errors(
    scripted: Scripted, stderr: str, stdout: str, error: type[Exception], op: str
) -> None:
    scripted.answer(stdout, stderr=stderr, code=3)
    calls: dict[str, Callable[[], object]] = {
        "remember": lambda: scripted.store.remember("default", "x"),
        "status": lambda: scripted.store.status("default"),
        "forget": lambda: scripted.store.forget("default", "abc"),
        "related": lambda: scripted.store.related("default", "abc"),
    }
    with pytest.raises(error) as caught:
        calls[op]()
    assert type(caught.value) is error
    assert f"mnemon {op} exited 3: {(stderr or stdout).strip()}" == str(caught.value)


def test_a_call_past_its_timeout_is_stopped(tmp_path: Path) -> None:
    empty_space(tmp_path)
    pid_file = tmp_path / "pid"
    exe = script(
        tmp_path / "slow",
        f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)\n",
    )
    store = MnemonCliStore(tmp_path, exe, timeout_ms=300)
    started = time.monotonic()
    with pytest.raises(StorageError, match="timed out after 300 ms"):
        store.status("default")
    assert time.monotonic() - started < KILL_GRACE_S, "SIGTERM was enough"
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)


def test_a_child_ignoring_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    empty_space(tmp_path)
    ready = tmp_path / "ready"
    exe = script(
        tmp_path / "stubborn",
        "import os, signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"open({str(ready)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)\n",
    )
    store = MnemonCliStore(tmp_path, exe, timeout_ms=500)
    started = time.monotonic()
    with pytest.raises(StorageError, match="timed out"):
        store.status("default")
    elapsed = time.monotonic() - started
    assert ready.exists(), "the child was running (and ignoring SIGTERM) when stopped"
    assert 0.5 + KILL_GRACE_S - 0.1 < elapsed < 0.5 + KILL_GRACE_S + 5
    with pytest.raises(ProcessLookupError):
        os.kill(int(ready.read_text()), 0)


def test_output_over_the_cap_kills_the_child(tmp_path: Path) -> None:
    empty_space(tmp_path)
    exe = script(
        tmp_path / "chatty",
        "import sys, time\nsys.stdout.write('o' * 40000); sys.stdout.flush()\n"
        "sys.stderr.write('e' * 40000); sys.stderr.flush()\ntime.sleep(60)\n",
    )
    started = time.monotonic()
    with pytest.raises(StorageError, match="printed more than 65536 bytes"):
        MnemonCliStore(tmp_path, exe, timeout_ms=30_000, output_cap=65_536).status("default")
    assert time.monotonic() - started < 10, "killed, not waited for"
    # the two streams together broke the cap; either alone is within it
    quiet = script(tmp_path / "ok", "import sys\nsys.stderr.write('e' * 40000)\nprint('{}')\n")
    assert MnemonCliStore(tmp_path, quiet, output_cap=65_536).status("default").edge_count == 0


def test_output_at_the_cap_is_accepted(tmp_path: Path) -> None:
    empty_space(tmp_path)
    payload = json.dumps({"total_insights": 1, "db_path": "x" * 1000})
    exe = script(tmp_path / "exact", f"import sys\nsys.stdout.write({payload!r})\n")
    status = MnemonCliStore(tmp_path, exe, output_cap=len(payload)).status("default")
    assert status.total_insights == 1
    with pytest.raises(StorageError, match="printed more than"):
        MnemonCliStore(tmp_path, exe, output_cap=len(payload) - 1).status("default")


# -- serialisation --------------------------------------------------------------------------


def _intervals(fake: Fake) -> list[tuple[float, float]]:
    return sorted((c["start"], c["end"]) for c in fake.calls())


def _in_parallel(*calls: Callable[[], object]) -> None:
    barrier = threading.Barrier(len(calls))
    errors: list[BaseException] = []

    def run(call: Callable[[], object]) -> None:
        barrier.wait()
        try:
            call()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_calls_on_one_data_directory_never_overlap(tmp_path: Path) -> None:
    fake = make_fake(tmp_path, FAKE_MNEMON_SLEEP_MS="300")
    fake.store.create_space("default")
    fake.clear()
    same_root = MnemonCliStore(tmp_path / "x" / ".." / "root", str(fake.exe))
    _in_parallel(
        lambda: fake.store.status("default"),
        lambda: same_root.status("default"),
        lambda: fake.store.remember("default", "written while others read"),
    )
    spans = _intervals(fake)
    assert len(spans) == 3
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end <= start, f"calls overlapped: {spans}"


def test_calls_on_different_data_directories_may_overlap(tmp_path: Path) -> None:
    """The check above can see an overlap: without a shared lock, calls do overlap."""
    first = make_fake(tmp_path / "a", FAKE_MNEMON_SLEEP_MS="600")
    (tmp_path / "b").mkdir()
    second = MnemonCliStore(tmp_path / "b" / "root", str(first.exe))
    first.store.create_space("default")
    second.create_space("default")
    first.clear()
    _in_parallel(lambda: first.store.status("default"), lambda: second.status("default"))
    (_, end), (start, _) = _intervals(first)
    assert start < end


# -- graph ----------------------------------------------------------------------------------


def _graph_fixture(seeded: Fake) -> tuple[str, str, str]:
    store = seeded.store
    a = store.remember(
        "default", 'Say "hi"\nthen </script> <b>', category="decision", entities=("Go",)
    ).id
    b = store.remember("default", "Go services restart nightly", entities=("Go",)).id
    c = store.remember("default", "ünïcode ✓ 🚀 and 'quotes'", category="insight").id
    store.link("default", a, c, edge_type="supersedes", weight=0.8, reason="newer")
    store.link("default", b, c, edge_type="causal", weight=0.3)
    return a, b, c


def test_graph_reads_mnemon_db_read_only(seeded: Fake) -> None:
    a, b, c = _graph_fixture(seeded)
    seeded.clear()
    files = sorted((seeded.root / "data" / "default").glob("mnemon.db*"))
    before = [(f.name, f.read_bytes()) for f in files]
    graph = seeded.store.graph("default")
    assert seeded.calls() == [], "no process for the graph"
    assert [(f.name, f.read_bytes()) for f in files] == before, "nothing written"
    with EmbeddedStore(seeded.root, FakeClock()) as embedded:
        assert graph == embedded.graph("default")
    kinds = {(e.source_id, e.target_id): (e.edge_type, e.weight) for e in graph.edges}
    assert kinds[(a, c)] == kinds[(c, a)] == ("supersedes", 0.8)
    assert kinds[(b, c)] == ("causal", 0.3)
    assert {(e.source_id, e.target_id) for e in graph.edges if e.edge_type == "entity"} == {
        (a, b),
        (b, a),
    }


def test_graph_falls_back_to_viz_html(seeded: Fake, monkeypatch: pytest.MonkeyPatch) -> None:
    _graph_fixture(seeded)
    exact = seeded.store.graph("default")

    def unreadable(path: Path) -> object:
        raise sqlite3.DatabaseError("file is not a database")

    monkeypatch.setattr(mnemon_store, "_db_graph", unreadable)
    seeded.clear()
    shown = seeded.store.graph("default")
    assert seeded.argvs()[0] == [
        *seeded.g(readonly=True),
        "viz",
        "--format",
        "html",
        "--output",
        "-",
    ]
    assert shown.nodes == exact.nodes, "nodes completed from a read-only listing"
    assert [(e.source_id, e.target_id, e.edge_type, e.label) for e in shown.edges] == [
        (e.source_id, e.target_id, e.edge_type, e.label) for e in exact.edges
    ]
    assert {e.weight for e in shown.edges} == {viz.VIZ_WEIGHT}


def test_viz_html_that_cannot_be_read_is_a_storage_error(scripted: Scripted) -> None:
    scripted.answer("<html><body>no graph here</body></html>")
    with pytest.raises(StorageError, match="could not be read"):
        scripted.store.graph("default")  # the empty database file has no tables


def test_parse_viz_html_accepts_json_and_js_literals() -> None:
    html = """<script>
      const nodes = new vis.DataSet([
        {"id": "n1", "label": "n1: [fact] a", "title": "full \\"one\\"\\nline\\u00e9", "color": "#3498db"},
        {id: 'n2', label: 'n2: [decision] b', title: 'it\\'s {two} [x]', color: {background: '#e74c3c'}},
        {label: "no id"}
      ]);
      const edges = new vis.DataSet([
        {from: "n1", to: "n2", label: "backbone", color: {color: "#AAAAAA"}, arrows: {to: {enabled: true}}},
        {from: "n2", to: "n1", label: "supersedes", color: "#123456", value: 0.7},
        {from: "n2", to: "n1", label: "mystery", color: "#123456"},
        {from: "n1", to: "n2", label: "entity", color: "#2ecc71", value: 7}
      ]);
    </script>"""  # noqa: E501
    got = parse_viz_html(html)
    assert got.nodes == (
        ("n1", "fact", 'full "one"\nlineé'),
        ("n2", "decision", "it's {two} [x]"),
    )
    assert [(e.source_id, e.target_id, e.edge_type, e.weight, e.label) for e in got.edges] == [
        ("n1", "n2", "temporal", viz.VIZ_WEIGHT, "backbone"),
        ("n2", "n1", "supersedes", 0.7, "supersedes"),
        ("n1", "n2", "entity", viz.VIZ_WEIGHT, "entity"),
    ], "type from the colour, else a label naming a type; otherwise dropped"
    with pytest.raises(ValueError, match="no node array"):
        parse_viz_html("<html></html>")
    assert parse_viz_html("var nodes = [];").nodes == ()


# -- import ---------------------------------------------------------------------------------


def test_import_writes_a_private_draft_and_removes_it(seeded: Fake) -> None:
    kept = seeded.store.remember("default", "already here").id
    seeded.clear()
    draft = ImportDraft(
        (
            DraftInsight("new one", "fact", 4, ("t",), ("E",), "agent", "2026-01-02T03:04:05Z"),
            DraftInsight("already here"),
        ),
        (DraftEdge(0, 1, "causal", 0.9, "why"),),
        "merge",
    )
    report = seeded.store.import_draft("default", draft)
    assert (report.imported, report.skipped, report.edges_inserted) == (1, 1, 1)
    assert report.ids[1] == kept
    (call,) = seeded.calls()
    path = Path(call["argv"][-1])
    assert call["draft_mode"] == 0o600
    assert not path.exists() and not path.parent.exists()
    new = next(i for i in seeded.store.list("default") if i.id == report.ids[0])
    assert (new.category, new.importance, new.tags, new.entities, new.source) == (
        "fact",
        4,
        ("t",),
        ("E",),
        "agent",
    )
    assert new.created_at == "2026-01-02T03:04:05Z"
    edges = seeded.store.graph("default").edges
    assert [(e.source_id, e.target_id, e.weight) for e in edges if e.edge_type == "causal"] == [
        (report.ids[0], kept, 0.9)
    ], "explicit edges keep their weight, one direction"


def test_import_removes_the_draft_when_mnemon_fails(
    scripted: Scripted, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "scripted.log"
    monkeypatch.setenv("SCRIPTED_LOG", str(log))
    scripted.answer("", stderr="Error: boom\n", code=1)
    with pytest.raises(StorageError, match="boom"):
        scripted.store.import_draft("default", ImportDraft((DraftInsight("x"),)))
    path = Path(json.loads(log.read_text())[-1])
    assert path.name == "draft.json" and not path.parent.exists()


# -- end to end -----------------------------------------------------------------------------


def test_the_port_contract_holds_over_the_fake_executable(tmp_path: Path) -> None:
    # The compact recall shape; the verbose one is held to the same hits by
    # test_both_recall_shapes_give_the_same_hits and drawn by the differential property test.
    check_long_term_contract(make_fake(tmp_path).store)


def test_keyword_recall_with_filters_searches_read_only(seeded: Fake) -> None:
    store = seeded.store
    fact = store.remember("default", "cache cache warm", category="fact", importance=4).id
    store.remember("default", "cache cold", category="general")
    other = store.remember("default", "cache tips", category="fact", importance=5).id
    seeded.clear()
    result = store.recall("default", "cache", mode="keyword", category="fact", limit=1)
    assert seeded.last() == [
        *seeded.g(readonly=True),
        "search",
        "--limit",
        "100000",
        "--",
        "cache",
    ]
    assert [h.insight.id for h in result.hits] == [other]
    assert result.hits[0].matched_via == "keyword" and result.hint is None
    assert all(i.access_count == 0 for i in store.list("default")), "documented: no counting"
    plain = store.recall("default", "cache", mode="keyword", limit=2)
    assert [h.insight.id for h in plain.hits] == [other, fact]
    assert all(h.insight.access_count == 1 for h in plain.hits)


def test_select_picks_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = make_fake(tmp_path)
    clock = FakeClock()
    chosen = open_long_term(
        tmp_path / "r1", clock, Config(long_term_store="mnemon", mnemon_path=str(fake.exe))
    )
    assert isinstance(chosen, MnemonCliStore) and chosen.executable == str(fake.exe)
    monkeypatch.setenv("PATH", str(fake.exe.parent))
    chosen = open_long_term(tmp_path / "r2", clock, Config(long_term_store="auto"))
    assert isinstance(chosen, MnemonCliStore) and chosen.executable == str(fake.exe)
    chosen.create_space("default")
    assert chosen.spaces() == ("default",)
    chosen = open_long_term(tmp_path / "r3", clock, Config(long_term_store="embedded"))
    assert isinstance(chosen, EmbeddedStore)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(select, "COMMON_DIRS", (str(tmp_path / "nowhere"),))
    assert isinstance(open_long_term(tmp_path / "r4", clock, Config()), EmbeddedStore)
    with pytest.raises(InvalidConfig, match="no mnemon executable"):
        open_long_term(tmp_path / "r5", clock, Config(long_term_store="mnemon"))
    monkeypatch.setenv("MNEMON_CLI_PATH", str(fake.exe))
    chosen = open_long_term(tmp_path / "r6", clock, Config())
    assert isinstance(chosen, MnemonCliStore) and chosen.executable == str(fake.exe)
    monkeypatch.delenv("MNEMON_CLI_PATH")
    monkeypatch.setattr(select, "COMMON_DIRS", (str(fake.exe.parent),))
    assert isinstance(open_long_term(tmp_path / "r7", clock, Config()), MnemonCliStore)
    with pytest.raises(InvalidConfig, match="not an executable file"):
        open_long_term(tmp_path / "r8", clock, Config(mnemon_path=str(tmp_path / "absent")))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["status", "--verbose"], "unknown flag: --verbose"),
        (["recall", "--basic", "--limit", "3", "--"], "accepts 1 arg(s), received 0"),
        (["--store", "default", "store", "remove", "--", "default"], "cannot remove the active"),
        (["remember", "--imp", "high", "--", "x"], 'invalid argument "high" for "--imp"'),
    ],
)
def test_the_fake_refuses_what_mnemon_refuses(seeded: Fake, argv: list[str], message: str) -> None:
    """So an adapter that dropped the empty query, or sent a wrong flag, would fail."""
    done = subprocess.run(
        [str(seeded.exe), "--data-dir", str(seeded.root), *argv], capture_output=True, text=True
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("Error: ") and message in done.stderr
    assert seeded.store.spaces() == ("default",)


def test_fake_launcher_needs_no_shell(tmp_path: Path) -> None:
    exe = install(tmp_path)
    assert exe.read_text().startswith(f"#!{sys.executable}\n")
    assert os.access(exe, os.X_OK) and shutil.which(exe.name, path=str(tmp_path)) == str(exe)
