"""End-to-end tests of the ``mnemon-sm`` command line, each run in a subprocess.

The CLI runs as ``python -m mnemon_sm.cli`` so the tests do not depend on the console script
being on PATH; one test runs the installed console script itself. Storage roots are seeded
in-process through :class:`MemoryRoot` where only the CLI's reaction matters, to keep the
number of subprocesses (about 0.3 s each) small.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import filelock
import pytest

from mnemon_sm import Config, MemoryRoot
from mnemon_sm.testing.snapshot import root_state

REPO = Path(__file__).resolve().parents[1]
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
HEX64 = re.compile(r"^[0-9a-f]{64}$")
FACT = "User prefers concise replies"
TARGETS = ("user", "memory")


def base_env(tmp_path: Path) -> dict[str, str]:
    """The inherited environment without MNEMON_DATA_DIR and with HOME in ``tmp_path``."""
    env = dict(os.environ)
    env.pop("MNEMON_DATA_DIR", None)
    env["HOME"] = str(tmp_path / "home")
    env["PYTHONIOENCODING"] = "utf-8"
    return env


def run_cli(
    tmp_path: Path,
    *args: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    command: list[str] | None = None,
) -> subprocess.CompletedProcess[str]:
    cmd = command or [sys.executable, "-m", "mnemon_sm.cli"]
    return subprocess.run(
        [*cmd, *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env if env is not None else base_env(tmp_path),
        cwd=cwd or tmp_path,
        timeout=120,
        check=False,
    )


def error_of(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The ``{"error": {...}}`` line a failing command prints on stderr (the only line)."""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    doc = json.loads(lines[0])
    assert list(doc) == ["error"], doc
    error: dict[str, Any] = doc["error"]
    assert isinstance(error["message"], str)
    assert error["message"]
    return error


def tree(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` (hidden ones included) as relative path -> bytes."""
    found = {}
    for base, _dirs, names in os.walk(directory):
        for name in names:
            path = Path(base, name)
            found[str(path.relative_to(directory))] = path.read_bytes()
    return found


def seed(root: Path, *entries: tuple[str, str, str | None]) -> None:
    """Create ``root`` with the given (target, content, importance) entries."""
    with MemoryRoot.open(root, Config(durability="off")) as opened:
        for target, content, importance in entries:
            opened.hot.add(target, content, importance)


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


# -- hot add: receipt and the on-disk format ------------------------------------------------


def test_add_prints_receipt_and_writes_reference_format(tmp_path: Path) -> None:
    root = tmp_path / "R"
    proc = run_cli(
        tmp_path,
        "--root",
        str(root),
        "hot",
        "add",
        "--target",
        "user",
        "--importance",
        "critical",
        FACT,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "success": True,
        "message": "Entry added.",
        "target": "user",
        "entryCount": 1,
        "usage": {"used": 28, "limit": 4096},
        "added": FACT,
    }
    runtime = root / "runtime"
    assert (runtime / "USER.md").read_bytes() == b"User prefers concise replies\n"
    assert (runtime / "MEMORY.md").read_bytes() == b""

    data = (runtime / "memories.json").read_bytes()
    doc = json.loads(data)
    assert list(doc) == ["version", "entries"]
    assert doc["version"] == 1
    [entry] = doc["entries"]
    assert list(entry) == ["content", "created_at", "updated_at", "target", "importance"]
    created = entry["created_at"]
    assert TIMESTAMP.match(created), created
    assert entry["updated_at"] == created
    stamp = dt.datetime.strptime(created, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC)
    assert abs(dt.datetime.now(dt.UTC) - stamp) < dt.timedelta(minutes=10)
    expected = (
        "{\n"
        '  "version": 1,\n'
        '  "entries": [\n'
        "    {\n"
        '      "content": "User prefers concise replies",\n'
        f'      "created_at": "{created}",\n'
        f'      "updated_at": "{created}",\n'
        '      "target": "user",\n'
        '      "importance": "critical"\n'
        "    }\n"
        "  ]\n"
        "}\n"
    )
    assert data == expected.encode("utf-8")
    assert data == (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


# -- typed rejections: exit 1, nothing under runtime/ changes -----------------------------


def test_capacity_example_is_rejected_and_changes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "R"
    seed(root, ("user", "x" * 4090, None))
    before = tree(root / "runtime")
    assert before["USER.md"] == b"x" * 4090 + b"\n"

    add = ("--root", str(root), "hot", "add", "--target", "user")
    proc = run_cli(tmp_path, *add, "--no-maintenance", "超出")

    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == ""
    error = error_of(proc)
    assert error["type"] == "CapacityExceeded"
    assert error["target"] == "user"
    assert (error["used"], error["projected"], error["limit"]) == (4090, 4100, 4096)
    assert tree(root / "runtime") == before

    # With maintenance (the default) the built-in compactor finds nothing to merge, and the
    # one 4090-byte entry cannot fit the 2853-byte budget: refused, nothing changed.
    proc = run_cli(tmp_path, *add, "超出")
    assert proc.returncode == 1, proc.stderr
    error = error_of(proc)
    assert (error["type"], error["rule"]) == ("MaintenanceRejected", "declined")
    assert "2853-byte budget" in error["message"]
    assert tree(root / "runtime") == before


SEED = (
    ("user", FACT, "critical"),
    ("memory", "alpha one", None),
    ("memory", "alpha two", "low"),
    ("memory", "beta", None),
)

REJECTIONS = [
    pytest.param(
        ["hot", "replace", "--target", "memory", "--old-text", "gamma", "delta"],
        None,
        "NoMatch",
        id="replace-no-match",
    ),
    pytest.param(
        ["hot", "remove", "--target", "user", "--old-text", "gamma"],
        None,
        "NoMatch",
        id="remove-no-match",
    ),
    pytest.param(
        ["hot", "remove", "--target", "user", "--old-text", "alpha"],
        None,
        "NoMatch",
        id="remove-other-target-only",
    ),
    pytest.param(
        ["hot", "replace", "--target", "memory", "--old-text", "alpha", "alpha three"],
        None,
        "AmbiguousMatch",
        id="replace-ambiguous",
    ),
    pytest.param(
        ["hot", "remove", "--target", "memory", "--old-text", "alpha"],
        None,
        "AmbiguousMatch",
        id="remove-ambiguous",
    ),
    pytest.param(
        ["hot", "replace", "--target", "memory", "--old-text", "beta", "alpha one"],
        None,
        "DuplicateEntry",
        id="replace-duplicate",
    ),
    pytest.param(
        ["hot", "add", "--target", "memory", "a § b"],
        None,
        "InvalidInput",
        id="add-delimiter",
    ),
    pytest.param(
        ["hot", "replace", "--target", "memory", "--old-text", "beta", "beta § gamma"],
        None,
        "InvalidInput",
        id="replace-delimiter",
    ),
    pytest.param(
        ["hot", "add", "--target", "memory", " \t\n\u3000 "],
        None,
        "InvalidInput",
        id="add-only-whitespace",
    ),
    pytest.param(
        ["hot", "add", "--target", "memory", "y" * 8193],
        None,
        "InvalidInput",
        id="add-too-large",
    ),
    pytest.param(
        ["hot", "add", "--target", "memory", "new fact"],
        "writeEnabled = false\n",
        "ReadOnly",
        id="read-only-add",
    ),
    pytest.param(
        ["hot", "remove", "--target", "memory", "--old-text", "beta"],
        "writeEnabled = false\n",
        "ReadOnly",
        id="read-only-remove",
    ),
    pytest.param(
        ["hot", "add", "--target", "memory", "new fact"],
        "idleReviewMs = 1\n",
        "InvalidConfig",
        id="invalid-config",
    ),
]


@pytest.mark.parametrize(("argv", "config", "error_type"), REJECTIONS)
def test_rejection_exits_1_and_changes_nothing(
    tmp_path: Path, argv: list[str], config: str | None, error_type: str
) -> None:
    root = tmp_path / "R"
    seed(root, *SEED)
    before = tree(root / "runtime")
    options = ["--root", str(root)]
    if config is not None:
        options += ["--config", str(write_config(tmp_path, config))]

    proc = run_cli(tmp_path, *options, *argv)

    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == ""
    error = error_of(proc)
    assert error["type"] == error_type
    if error_type == "AmbiguousMatch":
        assert error["candidates"] == ["alpha one", "alpha two"]
    if error_type == "InvalidConfig":
        assert "idleReviewMs" in error["message"] or "idle_review_ms" in error["message"]
    assert tree(root / "runtime") == before


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["hot", "add", FACT], id="missing-target"),
        pytest.param(["hot", "add", "--target", "everyone", FACT], id="bad-target"),
        pytest.param([], id="no-command"),
    ],
)
def test_usage_errors_exit_2_and_create_nothing(tmp_path: Path, argv: list[str]) -> None:
    root = tmp_path / "R"
    proc = run_cli(tmp_path, "--root", str(root), *argv)
    assert proc.returncode == 2, proc.stderr
    assert "usage:" in proc.stderr
    assert proc.stdout == ""
    assert not root.exists()


# -- storage failures: exit 3 ------------------------------------------------------------


def test_lock_held_by_another_process_exits_3(tmp_path: Path) -> None:
    root = tmp_path / "R"
    seed(root, ("user", FACT, None))
    config = write_config(tmp_path, "lockTimeoutMs = 200\n")
    before = tree(root / "runtime")

    with filelock.FileLock(str(root / "runtime" / ".memories.flock")):  # a process of ours
        proc = run_cli(
            tmp_path,
            "--root",
            str(root),
            "--config",
            str(config),
            "hot",
            "add",
            "--target",
            "user",
            "Another fact",
        )

    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == ""
    assert error_of(proc)["type"] == "LockTimeout"
    assert tree(root / "runtime") == before


def test_corrupt_source_exits_3_and_is_never_overwritten(tmp_path: Path) -> None:
    root = tmp_path / "R"
    seed(root, ("user", FACT, None))
    (root / "runtime" / "memories.json").write_bytes(b"{not json")
    before = tree(root / "runtime")

    add = run_cli(tmp_path, "--root", str(root), "hot", "add", "--target", "user", "More")
    assert add.returncode == 3, add.stderr
    error = error_of(add)
    assert error["type"] == "CorruptStore"
    assert error["path"] == "runtime/memories.json"
    assert "runtime/memories.json" in error["message"]
    assert tree(root / "runtime") == before
    assert (root / "runtime" / "memories.json").read_bytes() == b"{not json"

    show = run_cli(tmp_path, "--root", str(root), "hot", "show")
    assert show.returncode == 3, show.stderr
    assert error_of(show)["type"] == "CorruptStore"
    assert tree(root / "runtime") == before


# -- reading: hot show and context -------------------------------------------------------


def test_hot_show_prints_the_snapshot(tmp_path: Path) -> None:
    root = tmp_path / "R"
    seed(root, *SEED)
    source = json.loads((root / "runtime" / "memories.json").read_bytes())
    canonical = json.dumps(source, ensure_ascii=False, separators=(",", ":"))

    proc = run_cli(tmp_path, "--root", str(root), "hot", "show")

    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)
    assert list(shown) == ["revision", "user", "memory"]
    assert HEX64.match(shown["revision"])
    assert shown["revision"] == hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def expected(target: str) -> list[dict[str, str]]:
        return [
            {
                "content": e["content"],
                "importance": e["importance"],
                "createdAt": e["created_at"],
                "updatedAt": e["updated_at"],
            }
            for e in source["entries"]
            if e["target"] == target
        ]

    assert shown["user"] == {"entries": expected("user"), "usage": {"used": 28, "limit": 4096}}
    assert [e["content"] for e in shown["memory"]["entries"]] == ["alpha one", "alpha two", "beta"]
    assert [e["importance"] for e in shown["memory"]["entries"]] == ["normal", "low", "normal"]
    assert shown["memory"] == {
        "entries": expected("memory"),
        "usage": {"used": 9 + 4 + 9 + 4 + 4, "limit": 10240},
    }

    only_user = run_cli(tmp_path, "--root", str(root), "hot", "show", "--target", "user")
    assert only_user.returncode == 0, only_user.stderr
    assert json.loads(only_user.stdout) == {"revision": shown["revision"], "user": shown["user"]}


def test_context_prints_both_texts_without_storage_paths(tmp_path: Path) -> None:
    root = tmp_path / "R"
    seed(root, ("user", FACT, "critical"))

    text = run_cli(tmp_path, "--root", str(root), "context")
    as_json = run_cli(tmp_path, "--root", str(root), "context", "--json")

    assert text.returncode == 0, text.stderr
    out = text.stdout
    assert "Contents of USER.md (user profile; 28/4096 UTF-8 bytes)" in out
    assert f'<runtime-memory-file name="USER.md">\n{FACT}\n</runtime-memory-file>' in out
    assert (
        "Contents of MEMORY.md (working reference; 0/10240 UTF-8 bytes)\n"
        '<runtime-memory-file name="MEMORY.md">\n(empty)\n</runtime-memory-file>'
    ) in out
    for path in {str(root), str(root.resolve()), str(tmp_path), "memories.json"}:
        assert path not in out

    assert as_json.returncode == 0, as_json.stderr
    texts = json.loads(as_json.stdout)
    assert list(texts) == ["routingGuidance", "runtimeMemory"]
    assert texts["routingGuidance"]
    assert "Contents of USER.md (user profile; 28/4096 UTF-8 bytes)" in texts["runtimeMemory"]
    assert out == texts["routingGuidance"] + "\n\n" + texts["runtimeMemory"] + "\n"


def test_hot_add_on_a_full_memory_md_archives_and_lands_the_entry(tmp_path: Path) -> None:
    root = tmp_path / "R"
    facts = [("memory", f"Fact {i}: " + "detail " * 30, None) for i in range(46)]
    seed(root, *facts)
    add = ("--root", str(root), "hot", "add", "--target", "memory")
    proc = run_cli(tmp_path, *add, "--no-maintenance", "A late fact " * 10)
    assert error_of(proc)["type"] == "CapacityExceeded"

    proc = run_cli(tmp_path, *add, "A late fact " * 10)
    assert proc.returncode == 0, proc.stderr
    receipt = json.loads(proc.stdout)
    assert receipt["added"] == ("A late fact " * 10).strip()
    assert receipt["maintenance"]["kind"] == "long-term-archive"
    assert receipt["maintenance"]["sourceEntries"] == 46
    proc = run_cli(tmp_path, "--root", str(root), "recall", "Fact 7:", "--mode", "basic")
    assert proc.returncode == 0, proc.stderr
    assert "Fact 7: detail" in proc.stdout


# -- demo --------------------------------------------------------------------------------


def test_demo_runs_on_a_temporary_root(tmp_path: Path) -> None:
    env = base_env(tmp_path)
    env["MNEMON_DATA_DIR"] = str(tmp_path / "data")
    proc = run_cli(tmp_path, "demo", env=env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert sum("receipt:" in line for line in lines) >= 3
    assert sum("rejected:" in line for line in lines) >= 1
    assert "Contents of MEMORY.md" in proc.stdout
    assert "Contents of USER.md (user profile; 28/4096 UTF-8 bytes)" in proc.stdout
    assert not (tmp_path / "data").exists()
    assert not (tmp_path / "home" / ".mnemon").exists()


def test_demo_root_keeps_its_files(tmp_path: Path) -> None:
    demo_root = tmp_path / "demo"
    proc = run_cli(tmp_path, "demo", "--root", str(demo_root))
    assert proc.returncode == 0, proc.stderr
    assert f"storage root {demo_root}" in proc.stdout
    assert "receipt:" in proc.stdout
    runtime = demo_root / "runtime"
    doc = json.loads((runtime / "memories.json").read_bytes())
    contents = {t: [e["content"] for e in doc["entries"] if e["target"] == t] for t in TARGETS}
    assert contents["user"] == [FACT]
    assert contents["memory"]
    # The demo overflows MEMORY.md: it is archived and compacted, and the add lands last.
    assert '"maintenance": {"kind": "long-term-archive"' in proc.stdout
    assert contents["memory"][-2].startswith("The staging database is rebuilt every Sunday")
    assert not any("fax gateway" in c for c in contents["memory"])
    lines = proc.stdout.splitlines()
    preserved = next(line for line in lines if "receipt:" in line and '"preserved"' in line)
    assert "fax gateway" in preserved and '"fate": "removed"' in preserved  # in the history
    recalled = next(
        line
        for line in lines
        if "receipt:" in line and "fax gateway" in line and line != preserved
    )
    assert '"tags": ["hot-memory-archive"]' in recalled  # and archived in long-term memory
    # ... and creates documents until one is archived; its cold reference is recalled.
    assert '"archivedDocumentIds": [' in proc.stdout
    assert 'Archived document \\"Staging rollout runbook\\"' in proc.stdout
    assert any((demo_root / "documents" / "archived").iterdir())
    # ... and a primed turn with a cue, activity reaching the threshold, an idle review.
    assert '"primes": 1, "messagesEntered": 2' in proc.stdout
    assert '"state": "armed"' in proc.stdout and '"eligible": true' in proc.stdout
    assert '"action": "stored"' in proc.stdout
    assert "Release builds need the signing key from the vault" in contents["memory"][-1]
    for target, name in (("user", "USER.md"), ("memory", "MEMORY.md")):
        expected = "\n§\n".join(contents[target]) + "\n"
        assert (runtime / name).read_bytes() == expected.encode("utf-8")


# -- root resolution ---------------------------------------------------------------------


def test_mnemon_data_dir_is_the_default_root(tmp_path: Path) -> None:
    env = base_env(tmp_path)
    env["MNEMON_DATA_DIR"] = str(tmp_path / "data")
    proc = run_cli(tmp_path, "hot", "add", "--target", "memory", "From the environment", env=env)
    assert proc.returncode == 0, proc.stderr
    memory = tmp_path / "data" / "runtime" / "MEMORY.md"
    assert memory.read_bytes() == b"From the environment\n"
    assert not (tmp_path / "home" / ".mnemon").exists()


def test_blank_mnemon_data_dir_falls_back_to_home(tmp_path: Path) -> None:
    env = base_env(tmp_path)
    env["MNEMON_DATA_DIR"] = "  \t "
    proc = run_cli(tmp_path, "hot", "add", "--target", "memory", "From home", env=env)
    assert proc.returncode == 0, proc.stderr
    memory = tmp_path / "home" / ".mnemon" / "runtime" / "MEMORY.md"
    assert memory.read_bytes() == b"From home\n"


# -- specs -------------------------------------------------------------------------------


def test_specs_check_passes_in_the_repository(tmp_path: Path) -> None:
    proc = run_cli(tmp_path, "specs", "check", cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert "specs:" in proc.stdout


def test_specs_check_detects_an_altered_diagram(tmp_path: Path) -> None:
    intact = tmp_path / "intact"
    shutil.copytree(REPO / "specs", intact)
    altered = tmp_path / "altered"
    shutil.copytree(REPO / "specs", altered)
    diagram = altered / "diagrams" / "hot_memory_mutation.md"
    diagram.write_text(diagram.read_text(encoding="utf-8") + "\nhand edit\n", encoding="utf-8")

    good = run_cli(tmp_path, "specs", "check", "--dir", str(intact))
    bad = run_cli(tmp_path, "specs", "check", "--dir", str(altered))

    assert good.returncode == 0, good.stderr
    assert bad.returncode == 1, bad.stderr
    assert "hot_memory_mutation.md" in bad.stderr
    assert "stale" in bad.stderr


# -- the installed console script --------------------------------------------------------


def test_console_script(tmp_path: Path) -> None:
    [entry] = [
        e
        for e in importlib.metadata.entry_points(group="console_scripts")
        if e.name == "mnemon-sm"
    ]
    assert entry.value == "mnemon_sm.cli:main"
    script = Path(sys.executable).parent / "mnemon-sm"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "mnemon_sm.cli"]
    root = tmp_path / "R"
    proc = run_cli(
        tmp_path, "--root", str(root), "hot", "add", "--target", "user", FACT, command=command
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["added"] == FACT
    assert (root / "runtime" / "USER.md").read_bytes() == f"{FACT}\n".encode()


def test_a_reader_that_closes_stdout_early_gets_no_traceback(tmp_path: Path) -> None:
    """`mnemon-sm demo | head` must not end in a BrokenPipeError traceback."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write of the child now fails with EPIPE
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "mnemon_sm.cli", "demo", "--root", str(tmp_path / "r")],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
    finally:
        os.close(write_end)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr


def test_remember_then_recall_on_a_fresh_root(tmp_path: Path) -> None:
    """The long-term tier end to end: the first space is "default", the recall is scored."""
    root = tmp_path / "R"
    stored = run_cli(
        tmp_path,
        "--root",
        str(root),
        "remember",
        "The deploy script lives in tools/deploy.sh",
        "--space",
        "default",
    )
    assert stored.returncode == 0, stored.stderr
    assert json.loads(stored.stdout)["memoryBodyIds"] == ["default"]
    assert (root / "data" / "default" / "mnemon.db").is_file()
    catalog = json.loads((root / "data" / ".dsh-memory-bodies.json").read_text())
    assert [b["id"] for b in catalog["bodies"]] == ["default"]
    found = run_cli(tmp_path, "--root", str(root), "recall", "where is the deploy script")
    assert found.returncode == 0, found.stderr
    (item,) = json.loads(found.stdout)["results"]
    assert item["content"] == "The deploy script lives in tools/deploy.sh"
    assert item["memoryBodyId"] == "default"
    assert 0 < item["score"] <= 1
    assert item["relevanceTier"] in ("high", "medium")
    spaces = run_cli(tmp_path, "--root", str(root), "spaces", "list")
    assert [s["id"] for s in json.loads(spaces.stdout)] == ["default"]
    missing = run_cli(tmp_path, "--root", str(root), "recall", "x", "--space", "nope")
    assert missing.returncode == 1
    assert json.loads(missing.stderr)["error"]["type"] == "UnknownSpace"


# -- documents --------------------------------------------------------------------------------


def test_docs_overflow_archives_the_lru_document_and_its_reference_is_recallable(
    tmp_path: Path,
) -> None:
    """Acceptance of the Documents issue, end to end on a real root."""
    root = tmp_path / "R"
    config = write_config(tmp_path, 'documentsActiveLimit = 3000\ndurability = "off"\n')
    base = ("--root", str(root), "--config", str(config), "docs")
    body = "How to roll out the service, step by step. " * 20
    ids = []
    for name in ("Alpha rollout runbook", "Beta rollout runbook", "Gamma rollout runbook"):
        proc = run_cli(tmp_path, *base, "create", "--title", name, body)
        assert proc.returncode == 0, proc.stderr
        ids.append(json.loads(proc.stdout)["document"]["id"])
    created = json.loads(proc.stdout)
    assert created["maintenance"]["archivedDocumentIds"] == [ids[0]]

    index = json.loads((root / "documents" / "index.json").read_text())["documents"]
    status = {d["id"]: d for d in index}
    alpha = status[ids[0]]
    assert alpha["status"] == "archived" and status[ids[2]]["status"] == "active"
    archived_file = root / "documents" / "archived" / alpha["filename"]
    assert archived_file.is_file()
    assert not (root / "documents" / "active" / alpha["filename"]).exists()
    assert sum(d["sizeBytes"] for d in index if d["status"] == "active") <= 3000

    proc = run_cli(tmp_path, "--root", str(root), "recall", "Alpha rollout runbook")
    assert proc.returncode == 0, proc.stderr
    top = json.loads(proc.stdout)["results"][0]
    assert "Alpha rollout runbook" in top["content"]
    assert str(archived_file) in top["content"] and alpha["contentHash"] in top["content"]
    assert top["memoryBodyId"] in alpha["memoryBodyIds"]

    proc = run_cli(tmp_path, *base, "show", ids[0])
    assert json.loads(proc.stdout)["content"] == body.strip()
    proc = run_cli(tmp_path, *base, "update", ids[0], "new text")
    assert error_of(proc)["type"] == "DocumentArchived"
    proc = run_cli(tmp_path, *base, "search", "rollout", "--archived")
    assert {hit["id"] for hit in json.loads(proc.stdout)} == set(ids)
    proc = run_cli(tmp_path, *base, "archive", ids[2])
    assert json.loads(proc.stdout)["document"]["status"] == "archived"


# -- lifecycle replay -------------------------------------------------------------------------

EVENTS = Path(__file__).parent / "data" / "lifecycle_events.jsonl"


def test_lifecycle_replay_prints_every_step_and_a_restart_changes_nothing(
    tmp_path: Path,
) -> None:
    whole = run_cli(
        tmp_path, "--root", str(tmp_path / "A"), "lifecycle", "replay", "--apply", str(EVENTS)
    )
    assert whole.returncode == 0, whole.stderr
    out = whole.stdout
    for expected in (
        "idle --session_start--> idle",
        "cue appended: [MEMORY]",
        "idle --turn_stopping--> armed",
        '"eligible": true',
        "armed --tick--> reviewing",
        "reviewing --review_finished--> applying",
        "applying --review_completed--> idle",
        'review receipt: {"at": ',
    ):
        assert expected in out, expected
    final = json.loads(out[out.index("\n{") :])

    # The same log, with the host process killed and restarted after the turn ended.
    lines = EVENTS.read_text().splitlines()
    cut = next(i for i, line in enumerate(lines) if '"turn_ended"' in line) + 1
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_text("\n".join(lines[:cut]) + "\n")
    second.write_text("\n".join(lines[cut:]) + "\n")
    root_b = str(tmp_path / "B")
    replay_b = ("--root", root_b, "lifecycle", "replay", "--apply")
    assert run_cli(tmp_path, *replay_b, str(first)).returncode == 0
    resumed = run_cli(tmp_path, *replay_b, str(second))
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout[resumed.stdout.index("\n{") :]) == final
    memory = (tmp_path / "B" / "runtime" / "MEMORY.md").read_text()
    assert memory == (tmp_path / "A" / "runtime" / "MEMORY.md").read_text() != ""


def test_import_reindex_and_embed_on_a_fresh_root(tmp_path: Path) -> None:
    """Bulk import from JSON lines with a progress line on stderr, a rebuild of every side
    index, and the refusals: bad bytes, a bad item, no embedder."""
    root = tmp_path / "R"
    run_cli(tmp_path, "--root", str(root), "spaces", "create", "Notes", "notes", "--active")
    lines = ['"kiwi orchard notes"', '{"content": "mango harvest", "importance": 5}']
    source = tmp_path / "memories.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = run_cli(tmp_path, "--root", str(root), "import", str(source))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["imported"], report["skipped"], len(report["ids"])) == (2, 0, 2)
    assert "import: [" in done.stderr and "2/2" in done.stderr
    found = run_cli(tmp_path, "--root", str(root), "search", "mango")
    assert [h["content"] for h in json.loads(found.stdout)["results"]] == ["mango harvest"]
    rebuilt = run_cli(tmp_path, "--root", str(root), "reindex")
    assert json.loads(rebuilt.stdout) == {"rebuilt": [report["memoryBodyId"]]}
    bad_bytes = tmp_path / "bad.jsonl"
    bad_bytes.write_bytes(b'"caf\xe9"\n')
    bad_item = tmp_path / "item.jsonl"
    bad_item.write_text('"fine"\n{"content": "x", "colour": "red"}\n', encoding="utf-8")
    for path in (bad_bytes, bad_item):
        refused = run_cli(tmp_path, "--root", str(root), "import", str(path))
        assert refused.returncode == 1
        assert error_of(refused)["type"] == "InvalidInput"
    found = run_cli(tmp_path, "--root", str(root), "search", "fine")
    assert json.loads(found.stdout)["results"] == []  # nothing of a refused file was written
    no_model = run_cli(tmp_path, "--root", str(root), "embed")
    assert no_model.returncode == 1 and error_of(no_model)["type"] == "InvalidInput"


def test_bad_bytes_and_bad_text_on_the_command_line_are_typed_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each input the CLI can be fed that is not valid text: a typed error line and exit 1,
    never a traceback, and nothing written. Arguments holding bytes that are not UTF-8
    reach Python as lone surrogates (surrogateescape), as they do from a shell."""
    from mnemon_sm.cli import main

    monkeypatch.delenv("MNEMON_DATA_DIR", raising=False)
    root = tmp_path / "root"
    main(["--root", str(root), "remember", "--space", "default", "A first fact"])
    capsys.readouterr()
    bad_file = tmp_path / "latin1.md"
    bad_file.write_bytes("caf\xe9 notes".encode("latin-1"))
    bad_config = tmp_path / "bad.toml"
    bad_config.write_bytes(b'durability = "caf\xe9"\n')

    before = root_state(root)
    cases = [
        ["docs", "create", "--title", "Title", "--file", str(bad_file)],
        ["import", str(bad_file)],
        ["--config", str(bad_config), "hot", "show"],
        ["docs", "create", "--title", "Title \udce9", "body"],
        ["docs", "create", "--title", "Title", "body \udce9"],
        ["docs", "create", "--title", "Title", "body", "--description", "d\udce9"],
        ["docs", "create", "--title", "Title", "body", "--session", "s\udce9"],
        ["docs", "create", "--title", "Title", "body", "--source", "notes/\udce9.md"],
        ["spaces", "create", "Notes \udce9", "Project notes"],
        ["spaces", "create", "Notes", "Project \udce9 notes"],
        ["remember", "--space", "default", "fact \udce9"],
        ["hot", "add", "--target", "memory", "fact \udce9"],
        ["search", "caf\udce9"],
    ]
    for args in cases:
        with pytest.raises(SystemExit) as caught:
            main(["--root", str(root), *args])
        assert caught.value.code == 1, args
        error = json.loads(capsys.readouterr().err.strip())["error"]
        assert error["type"] in ("InvalidInput", "InvalidConfig"), (args, error)
    assert root_state(root) == before


# -- the newcomer path: version, option order, file errors, safe defaults ----------------------


def test_version_prints_the_package_version(tmp_path: Path) -> None:
    proc = run_cli(tmp_path, "--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"mnemon-sm {importlib.metadata.version('mnemon-sm')}\n"


def test_docs_update_takes_options_before_the_text(tmp_path: Path) -> None:
    root = tmp_path / "R"
    with MemoryRoot.open(root, Config(durability="off")) as opened:
        doc_id = opened.documents.create("Runbook", "old body").document.id
    proc = run_cli(
        tmp_path, "--root", str(root), "docs", "update", doc_id, "--title", "Deploys", "new body"
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["document"]["title"] == "Deploys"
    shown = run_cli(tmp_path, "--root", str(root), "docs", "show", "--", doc_id)
    assert json.loads(shown.stdout)["content"] == "new body"
    both = run_cli(tmp_path, "--root", str(root), "docs", "update", doc_id, "x", "--file", "f")
    assert both.returncode == 2 and "not allowed with" in both.stderr


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["docs", "create", "--title", "T", "--file", "absent.md"], id="docs-create"),
        pytest.param(["docs", "update", "some-id", "--file", "absent.md"], id="docs-update"),
        pytest.param(["import", "absent.jsonl"], id="import"),
        pytest.param(["lifecycle", "replay", "absent.jsonl"], id="replay"),
        pytest.param(["lifecycle", "replay", "--apply", "absent.jsonl"], id="replay-apply"),
    ],
)
def test_a_missing_file_is_a_json_error(tmp_path: Path, argv: list[str]) -> None:
    proc = run_cli(tmp_path, "--root", str(tmp_path / "R"), *argv)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    error = error_of(proc)
    assert error["type"] == "InvalidInput" and "absent" in error["message"]


def test_lifecycle_replay_leaves_the_root_alone_unless_applied(tmp_path: Path) -> None:
    root = tmp_path / "R"
    seed(root, ("memory", "Deploys run through the release pipeline", None))
    before = root_state(root)
    dry = run_cli(tmp_path, "--root", str(root), "lifecycle", "replay", str(EVENTS))
    assert dry.returncode == 0, dry.stderr
    assert "armed --tick--> reviewing" in dry.stdout and "--apply" in dry.stderr
    assert root_state(root) == before
    applied = run_cli(tmp_path, "--root", str(root), "lifecycle", "replay", "--apply", str(EVENTS))
    assert applied.returncode == 0, applied.stderr
    assert dry.stdout == applied.stdout
    assert root_state(root) != before


def test_specs_render_writes_where_out_says(tmp_path: Path) -> None:
    out = tmp_path / "diagrams"
    committed = tree(REPO / "specs" / "diagrams")
    proc = run_cli(tmp_path, "specs", "render", "--out", str(out), cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert tree(REPO / "specs" / "diagrams") == committed
    md = {name: data for name, data in tree(out).items() if name.endswith(".md")}
    assert md == {name: data for name, data in committed.items() if name.endswith(".md")}


def test_specs_render_refuses_to_write_into_an_installed_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from mnemon_sm.cli import specs as cli_specs
    from mnemon_sm.cli.main import main

    packaged = tmp_path / "site-packages" / "mnemon_sm" / "_specs"
    shutil.copytree(REPO / "specs", packaged, ignore=shutil.ignore_patterns("diagrams"))
    monkeypatch.setattr(cli_specs, "spec_dir", lambda: packaged)
    monkeypatch.chdir(tmp_path)  # no ./specs here
    with pytest.raises(SystemExit) as exit_:
        main(["specs", "render"])
    assert exit_.value.code == 2
    assert "--out" in capsys.readouterr().err
    assert not (packaged / "diagrams").exists()
    main(["specs", "render", "--out", str(tmp_path / "out")])
    assert (tmp_path / "out" / "hot_memory_mutation.md").is_file()
    assert not (packaged / "diagrams").exists()


@pytest.mark.parametrize("form", ["demo-root", "global-root"])
def test_demo_refuses_a_root_with_anything_in_it_unless_forced(tmp_path: Path, form: str) -> None:
    root = tmp_path / "R"
    root.mkdir()
    (root / "notes.txt").write_text("mine\n")
    where = ["demo", "--root", str(root)] if form == "demo-root" else ["--root", str(root), "demo"]
    proc = run_cli(tmp_path, *where)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == ""
    error = error_of(proc)
    assert error["type"] == "InvalidInput" and "--force" in error["message"]
    assert tree(root) == {"notes.txt": b"mine\n"}
    forced = run_cli(tmp_path, *where, "--force")
    assert forced.returncode == 0, forced.stderr
    assert (root / "runtime" / "MEMORY.md").is_file()
