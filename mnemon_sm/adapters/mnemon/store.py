"""``MnemonCliStore``: the ``LongTermStore`` port over the real ``mnemon`` executable.

Theory of operation
-------------------
Every operation Mnemon defines runs as one child process, never through a shell::

    <mnemon> --data-dir <root> [--store <space>] [--readonly] <command> <flags> [-- <args>]

Global flags come first, then the subcommand and its flags, then ``--`` and the positional
arguments (content, query, ids, a file), so text starting with ``-`` stays text and an empty
recall query stays one empty argument. stdin is ``/dev/null``. A call that outlives
``timeout_ms`` gets SIGTERM, then SIGKILL after :data:`KILL_GRACE_S`; stdout and stderr
together may hold at most ``output_cap`` bytes, beyond which the child is killed. The child
runs in its own process group, so the signals also reach anything it started.

Serialisation: one re-entrant lock per data directory (keyed by its resolved path, shared by
every instance in the process) is held for the whole of an operation, which may take several
steps (a child process, then a read of ``mnemon.db``). Mnemon migrates a database as it opens
it and parallel openers met SQLITE_BUSY; dsh-mnemon serialises its calls for the same reason.

Where each answer comes from:

- ``spaces``: the directories ``<root>/data/<id>/`` holding ``mnemon.db`` (no call). Every
  other method first checks its space exists there (``UnknownSpace``), because Mnemon would
  create a missing store as it opens it.
- rows the CLI's JSON leaves incomplete (compact smart-recall rows, search and related rows
  carry no tags, entities, source, counts or times) are completed from ``mnemon.db`` opened
  read-only (SQLite URI ``mode=ro``) right after the call, under the same lock; if that read
  fails the rows keep what the CLI printed.
- ``graph``: read from ``mnemon.db`` read-only **by default**. The schema is shared and stable
  (Mnemon's migrations only add columns), and it holds what ``viz`` cannot show: edge weights,
  exact edge types (viz encodes a type as a colour and has none for ``supersedes``) and whole
  rows. If that read fails (an unknown schema, an unreadable file), the graph comes from
  ``viz --format html --output -``: its vis.js node and edge arrays are found with regular
  expressions (the HTML is never executed), nodes are completed from a read-only listing, and
  edges carry weight 0.5 since viz shows none.

Arguments are validated before any process starts, with the embedded store's rules
(:mod:`.sqlite.checks`), plus what an argument list cannot carry: NUL characters, and commas in
tags or entities (Mnemon takes both comma-separated).

Errors: a non-zero exit becomes ``UnknownSpace`` when the output says the store does not
exist, ``UnknownInsight`` (forget, link, related) when it says an insight is missing or
deleted, ``InvalidInput`` when it reads as a validation message, ``StorageError`` otherwise; the
message names the command and carries Mnemon's stderr (or stdout). A timeout, output over the
cap, a child that cannot start, and output that is not JSON ("returned invalid JSON") or not of
the documented shape are ``StorageError``.

Deliberate differences from calling Mnemon by hand:

- a remember Mnemon reports as ``skipped`` returns ``id = replaced_id`` (Mnemon prints a fresh
  id it never saved);
- Mnemon's ``search`` takes no filters, so a keyword recall with a category or source filter
  searches read-only with the largest limit, then filters and cuts here; such a recall counts
  no access.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mnemon_sm.adapters.mnemon.args import _draft_json, _joined, _positive
from mnemon_sm.adapters.mnemon.db import _db_graph, _db_rows
from mnemon_sm.adapters.mnemon.output import (
    _confidence,
    _import_report,
    _insight,
    _int,
    _number,
    _obj,
    _opt_text,
    _parse_json,
    _receipt,
    _Row,
    _rows,
    _sparse,
    _status,
    _text,
    _via,
)
from mnemon_sm.adapters.mnemon.process import _failure, run_process
from mnemon_sm.adapters.mnemon.viz import parse_viz_html
from mnemon_sm.adapters.path_locks import path_lock
from mnemon_sm.adapters.sqlite.reads import in_order
from mnemon_sm.errors import InvalidInput, StorageError, UnknownSpace
from mnemon_sm.ports.long_term import checks, layout
from mnemon_sm.ports.long_term.checks import Prepared
from mnemon_sm.ports.long_term.layout import DB_FILE
from mnemon_sm.ports.long_term.values import (
    Capabilities,
    ForgetReceipt,
    GraphSnapshot,
    ImportDraft,
    ImportReport,
    Insight,
    LinkReceipt,
    RecallHit,
    RecallResult,
    RelatedHit,
    RememberReceipt,
    SpaceStatus,
)

LIST_LIMIT = checks.LIMIT_MAX
_FULL_ROW = frozenset({"tags", "entities", "source", "access_count", "created_at", "updated_at"})


# -- the adapter ----------------------------------------------------------------------------


class MnemonCliStore:
    """Memory Spaces of one root, through the ``mnemon`` executable.

    Args:
        root: Mnemon's data directory (``--data-dir``); stores live in
            ``<root>/data/<space>/mnemon.db``.
        executable: the ``mnemon`` binary (``~`` is expanded).
        timeout_ms: per call; SIGTERM when exceeded, SIGKILL 1.5 s later.
        output_cap: bytes of stdout plus stderr a call may print before it is killed.
    """

    def __init__(
        self,
        root: str | Path,
        executable: str,
        *,
        timeout_ms: int = 10_000,
        output_cap: int = 2 * 1024 * 1024,
    ) -> None:
        if not isinstance(executable, str) or not executable:
            raise InvalidInput("executable must name the mnemon binary")
        self._root = Path(os.path.abspath(root))
        self._executable = os.path.expanduser(executable)
        self._timeout_ms = _positive(timeout_ms, "timeout_ms")
        self._cap = _positive(output_cap, "output_cap")
        self._lock = path_lock(self._root)  # the data directory's

    @property
    def root(self) -> Path:
        return self._root

    @property
    def executable(self) -> str:
        return self._executable

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            write_mode="exact", deletion_mode="soft", score_semantics="normalized-relevance"
        )

    # -- plumbing -----------------------------------------------------------------------------

    def _db(self, space: str) -> Path:
        return self._root / "data" / space / DB_FILE

    def _existing(self, space: str) -> str:
        space = checks.space_id(space)
        if not self._db(space).is_file():
            raise UnknownSpace(f"no space {space!r}")
        return space

    def _run(
        self,
        space: str | None,
        command: Sequence[str],
        flags: Sequence[str] = (),
        args: Sequence[str] = (),
        *,
        readonly: bool = False,
        insight_op: bool = False,
    ) -> str:
        """Run one command (the caller holds the lock); its stdout, or the typed error."""
        argv = [self._executable, "--data-dir", str(self._root)]
        if space is not None:
            argv += ["--store", space]
        if readonly:
            argv.append("--readonly")
        argv += [*command, *flags]
        if args:
            argv += ["--", *args]
        if any("\0" in part for part in argv):
            raise InvalidInput("text passed to mnemon may not contain NUL characters")
        label = "mnemon " + " ".join(command)
        out = run_process(argv, timeout_ms=self._timeout_ms, cap=self._cap, label=label)
        if out.code != 0:
            raise _failure(label, out, insight_op=insight_op)
        return out.stdout

    def _json(self, space: str | None, command: Sequence[str], *rest: Any, **opts: Any) -> Any:
        return _parse_json("mnemon " + " ".join(command), self._run(space, command, *rest, **opts))

    def _complete(self, space: str, rows: Sequence[_Row], label: str) -> list[Insight]:
        """Whole insights for ``rows``: as printed when complete, else from ``mnemon.db``."""
        partial = [row.fields["id"] for row in rows if not row.fields.keys() >= _FULL_ROW]
        stored: dict[str, Insight] = {}
        if partial:
            try:
                stored = _db_rows(self._db(space), partial)
            except (sqlite3.Error, OSError):
                stored = {}  # keep what the CLI printed
        return [stored.get(row.fields["id"]) or _insight(row.fields, label) for row in rows]

    def version(self) -> str:
        """``mnemon --version`` without its ``mnemon version`` prefix."""
        with self._lock:
            out = run_process(
                [self._executable, "--version"],
                timeout_ms=self._timeout_ms,
                cap=self._cap,
                label="mnemon --version",
            )
        if out.code != 0:
            raise _failure("mnemon --version", out, insight_op=False)
        return out.stdout.strip().removeprefix("mnemon version ").strip()

    # -- spaces -------------------------------------------------------------------------------

    def spaces(self) -> tuple[str, ...]:
        return layout.list_stores(self._root)  # a symlinked store is never listed

    def create_space(self, space: str) -> None:
        space = checks.space_id(space)
        with self._lock:
            if self._db(space).is_file():
                raise InvalidInput(f"space {space!r} already exists")
            self._run(space, ("store", "create"), args=(space,))
            if not self._db(space).is_file():
                raise StorageError(
                    f"mnemon store create succeeded but data/{space}/{DB_FILE} does not exist"
                )

    def delete_space(self, space: str) -> None:
        with self._lock:
            space = self._existing(space)
            others = [s for s in self.spaces() if s != space]
            if not others:
                raise InvalidInput(
                    f"space {space!r} is the only store; Mnemon cannot remove its effective store"
                )
            try:
                pointer = (self._root / "active").read_text("utf-8").strip()
            except (OSError, UnicodeDecodeError):
                pointer = ""
            replacement = pointer if pointer in others else others[0]
            self._run(replacement, ("store", "remove"), args=(space,))

    # -- reads --------------------------------------------------------------------------------

    def status(self, space: str) -> SpaceStatus:
        with self._lock:
            space = self._existing(space)
            return _status(self._json(space, ("status",)), "mnemon status")

    def recall(
        self,
        space: str,
        query: str,
        *,
        mode: str = "relevance",
        limit: int = 10,
        category: str | None = None,
        source: str | None = None,
        intent: str | None = None,
        readonly: bool = False,
    ) -> RecallResult:
        query = checks.query(query)
        mode = checks.mode(mode)
        limit = checks.limit(limit)
        category = checks.category_filter(category)
        source = checks.source_filter(source)
        intent = checks.intent(intent)
        filters = [
            *(("--cat", category) if category is not None else ()),
            *(("--source", source) if source is not None else ()),
        ]
        with self._lock:
            space = self._existing(space)
            if mode in ("relevance", "smart"):  # Mnemon ranks with its own smart recall
                flags = ["--limit", str(limit), *filters]
                if intent is not None:
                    flags += ["--intent", intent]
                return self._smart(space, query, flags, readonly)
            if mode == "basic":
                flags = ["--basic", "--limit", str(limit), *filters]
                data = self._json(space, ("recall",), flags, (query,), readonly=readonly)
                rows, _ = _rows(data, "mnemon recall --basic")
                found = self._complete(space, rows, "mnemon recall --basic")
                return RecallResult(
                    tuple(RecallHit(item) for item in found), _sparse(len(found), limit)
                )
            return self._keyword(space, query, limit, category, source, readonly)

    def _smart(self, space: str, query: str, flags: list[str], readonly: bool) -> RecallResult:
        label = "mnemon recall"
        data = self._json(space, ("recall",), flags, (query,), readonly=readonly)
        rows, wrapper = _rows(data, label)
        meta = wrapper.get("meta")
        meta = meta if isinstance(meta, dict) else {}
        hint = _opt_text(wrapper, "hint", label) or _opt_text(meta, "hint", label)
        hits = []
        for row, item in zip(rows, self._complete(space, rows, label), strict=True):
            score = _number(row.extra, "score", label)
            confidence = _opt_text(row.extra, "confidence", label)
            if confidence is None and score is not None:
                confidence = _confidence(score)
            intent = _opt_text(row.extra, "intent", label) or _opt_text(meta, "intent", label)
            hits.append(RecallHit(item, score, intent, _via(row.extra, label), confidence))
        return RecallResult(tuple(hits), hint)

    def _keyword(
        self,
        space: str,
        query: str,
        limit: int,
        category: str | None,
        source: str | None,
        readonly: bool,
    ) -> RecallResult:
        label = "mnemon search"
        filtered = category is not None or source is not None
        asked = LIST_LIMIT if filtered else limit
        data = self._json(
            space, ("search",), ["--limit", str(asked)], (query,), readonly=readonly or filtered
        )
        rows, _ = _rows(data, label)
        hits = []
        for row, item in zip(rows, self._complete(space, rows, label), strict=True):
            if category not in (None, item.category) or source not in (None, item.source):
                continue
            score = _number(row.extra, "score", label)
            confidence = None if score is None else _confidence(score)
            via = _via(row.extra, label) or "keyword"
            hits.append(RecallHit(item, score, None, via, confidence))
        hits = hits[:limit]
        return RecallResult(tuple(hits), _sparse(len(hits), limit))

    def related(
        self, space: str, insight_id: str, *, depth: int = 2, edge_type: str | None = None
    ) -> tuple[RelatedHit, ...]:
        start = checks.insight_id(insight_id)
        depth = checks.depth(depth)
        kind = None if edge_type is None else checks.edge_type(edge_type)
        flags = ["--depth", str(depth), *(("--edge", kind) if kind is not None else ())]
        label = "mnemon related"
        with self._lock:
            space = self._existing(space)
            data = self._json(space, ("related",), flags, (start,), insight_op=True)
            rows, _ = _rows(data, label)
            found = self._complete(space, rows, label)
        return tuple(
            RelatedHit(item, _int(row.extra, "depth", label, 1), _via(row.extra, label) or "")
            for row, item in zip(rows, found, strict=True)
        )

    def list(
        self,
        space: str,
        *,
        query: str | None = None,
        category: str | None = None,
        limit: int = 100_000,
    ) -> tuple[Insight, ...]:
        text = "" if query is None else checks.query(query)
        category = checks.category_filter(category)
        limit = checks.limit(limit)
        return self._list(space, text, category, limit)

    def _list(
        self, space: str, query: str, category: str | None, limit: int
    ) -> tuple[Insight, ...]:
        flags = ["--basic", "--limit", str(limit)]
        if category is not None:
            flags += ["--cat", category]
        label = "mnemon recall --basic"
        with self._lock:
            space = self._existing(space)
            data = self._json(space, ("recall",), flags, (query,), readonly=True)
            rows, _ = _rows(data, label)
            return tuple(self._complete(space, rows, label))

    def insights(self, space: str, ids: Sequence[str]) -> tuple[Insight, ...]:
        wanted = [checks.insight_id(i) for i in ids]
        with self._lock:
            space = self._existing(space)
            try:
                found = _db_rows(self._db(space), wanted, active_only=True)
            except (sqlite3.Error, OSError) as exc:
                raise StorageError(f"cannot read insights of {space!r}: {exc}") from exc
        return in_order(found, wanted)

    def graph(self, space: str) -> GraphSnapshot:
        with self._lock:
            space = self._existing(space)
            try:
                return _db_graph(self._db(space))
            except (sqlite3.Error, OSError):
                return self._viz_graph(space)

    def _viz_graph(self, space: str) -> GraphSnapshot:
        """The graph from ``viz`` (the fallback; see the module docstring)."""
        label = "mnemon viz"
        html = self._run(space, ("viz",), ["--format", "html", "--output", "-"], readonly=True)
        try:
            shown = parse_viz_html(html)
        except ValueError as exc:
            raise StorageError(f"{label} returned HTML that could not be read: {exc}") from exc
        rows = {item.id: item for item in self._list(space, "", None, LIST_LIMIT)}
        nodes = tuple(
            rows.get(node) or Insight(node, content, category)
            for node, category, content in shown.nodes
        )
        ids = {node.id for node in nodes}
        edges = tuple(e for e in shown.edges if e.source_id in ids and e.target_id in ids)
        return GraphSnapshot(nodes, edges)

    # -- writes -------------------------------------------------------------------------------

    def remember(
        self,
        space: str,
        content: str | Prepared,
        *,
        category: str = "general",
        importance: int = 3,
        tags: tuple[str, ...] = (),
        entities: tuple[str, ...] = (),
        source: str = "user",
    ) -> RememberReceipt:
        item = checks.remembered(content, category, importance, tags, entities, source)
        flags = ["--cat", item.category, "--imp", str(item.importance), "--source", item.source]
        if item.tags:
            flags += ["--tags", _joined(item.tags, "tags")]
        if item.entities:
            flags += ["--entities", _joined(item.entities, "entities")]
        with self._lock:
            space = self._existing(space)
            data = self._json(space, ("remember",), flags, (item.content,))
        return _receipt(data, "mnemon remember")

    def link(
        self,
        space: str,
        source_id: str,
        target_id: str,
        *,
        edge_type: str = "semantic",
        weight: float = 0.5,
        reason: str | None = None,
    ) -> LinkReceipt:
        src, dst = checks.insight_id(source_id), checks.insight_id(target_id)
        if src == dst:
            raise InvalidInput("an insight cannot be linked to itself")
        kind, value = checks.edge_type(edge_type), checks.weight(weight)
        why = checks.reason(reason)
        flags = ["--type", kind, "--weight", repr(value)]
        if why is not None:
            flags += ["--meta", json.dumps({"reason": why}, ensure_ascii=False)]
        label = "mnemon link"
        with self._lock:
            space = self._existing(space)
            row = _obj(
                self._json(space, ("link",), flags, (src, dst), insight_op=True), label, "receipt"
            )
        weight_out = _number(row, "weight", label)
        return LinkReceipt(
            source_id=_text(row, "source_id", label, src),
            target_id=_text(row, "target_id", label, dst),
            edge_type=_text(row, "edge_type", label, kind),
            weight=value if weight_out is None else weight_out,
            metadata=_obj(row.get("metadata") or {}, label, "'metadata'"),
        )

    def forget(self, space: str, insight_id: str) -> ForgetReceipt:
        node = checks.insight_id(insight_id)
        label = "mnemon forget"
        with self._lock:
            space = self._existing(space)
            data = self._json(space, ("forget",), (), (node,), insight_op=True)
        return ForgetReceipt(_text(_obj(data, label, "the receipt"), "id", label, node))

    def import_draft(self, space: str, draft: ImportDraft) -> ImportReport:
        items, edges = checks.draft(draft)
        document = _draft_json(draft.source, items, edges)
        with self._lock:
            space = self._existing(space)
            try:
                directory = tempfile.mkdtemp(prefix="mnemon-draft-")  # mode 0700
                try:
                    path = os.path.join(directory, "draft.json")
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                    with os.fdopen(fd, "w", encoding="utf-8") as handle:
                        json.dump(document, handle, ensure_ascii=False)
                    data = self._json(space, ("import",), (), (path,))
                finally:
                    shutil.rmtree(directory, ignore_errors=True)
            except OSError as exc:
                raise StorageError(f"writing the import draft failed: {exc}") from exc
        return _import_report(data, "mnemon import", len(items))
