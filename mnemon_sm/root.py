"""The public facade: a storage root with its hot memory and per-turn context.

Host integrators use only this module (re-exported by the package)::

    root = MemoryRoot.open("~/.mnemon")
    receipt = root.hot.add("user", "User prefers concise replies", importance="critical")
    text = root.context.runtime_memory()
    result = root.tools.call("mnemon_recall", {"query": "release process"})

No state machine is visible here. Operations on one root are serialized inside the process by
a mutex and across processes by the root's file lock; every failure is a typed
``MnemonError``. Workers run on threads of their own, with a timeout, through the root's one
:class:`~mnemon_sm.flows.workers.runner.Delegate`; called from inside a worker run, every public
operation raises ``Busy``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from mnemon_sm.adapters.postgres import PgBackend, PgSpaces, is_postgres_url, redacted
from mnemon_sm.adapters.real import RandomIds, SystemClock, real_ports
from mnemon_sm.adapters.select import configured_embedder, open_long_term
from mnemon_sm.adapters.sqlite import EmbeddedStore
from mnemon_sm.adapters.workers.builtin import BuiltinWorkers
from mnemon_sm.agent_tools import AgentTools
from mnemon_sm.config import Config, DocumentIndex
from mnemon_sm.engine.context import FlowContext
from mnemon_sm.errors import StorageError
from mnemon_sm.flows.audit import AuditLog, AuditRecord, read_audit
from mnemon_sm.flows.documents.api import Documents
from mnemon_sm.flows.hot.api import Context, HotMemory, HotSnapshot, Preview, _Shared
from mnemon_sm.flows.hot.history import HotHistory
from mnemon_sm.flows.hot.journal import Journal
from mnemon_sm.flows.hot.maintenance import MaintenanceFlow
from mnemon_sm.flows.hot.mutation import HotMutationFlow
from mnemon_sm.flows.lifecycle.api import AgentLifecycle
from mnemon_sm.flows.lifecycle.state import LifecycleReset, agent_ids
from mnemon_sm.flows.long_term.api import LongTermMemory
from mnemon_sm.flows.long_term.catalog import Catalog
from mnemon_sm.flows.workers.runner import Delegate, host_only
from mnemon_sm.observe import Events
from mnemon_sm.ports import Ports
from mnemon_sm.ports.embedder import Embedder
from mnemon_sm.ports.long_term.port import LongTermStore
from mnemon_sm.ports.workers import Workers

__all__ = ["Context", "HotMemory", "HotSnapshot", "MemoryRoot", "Preview", "Progress"]

Progress = Callable[[str, int, int], None]  # (what, done, total) of a long rebuild


def _open_long_term(
    path: Path | None,
    config: Config,
    ports: Ports,
    delegate: Delegate,
    progress: Progress | None,
    backend: PgBackend | None,
) -> tuple[LongTermMemory, LongTermStore | None]:
    """The long-term facade, and the store it uses when this root opened it (None when the
    caller passed one in ``ports``: that one stays the caller's to close). A root on
    PostgreSQL keeps its spaces there (:class:`PgSpaces`), unless ``ports`` has a store."""
    owned: LongTermStore | None = None
    store = ports.long_term
    if store is None and backend is not None:
        store = owned = PgSpaces(
            backend,
            ports.clock,
            embedder=ports.embedder or configured_embedder(config),
            durability=config.durability,
            progress=progress,
            readonly=not config.write_enabled,
            lock_timeout_ms=config.lock_timeout_ms,
        )
    if store is None and path is None:
        raise StorageError(
            "a root opened with its own ports and no directory needs a long-term store in "
            "ports.long_term"
        )
    if store is None:
        assert path is not None
        store = owned = open_long_term(path, ports.clock, config, ports.embedder, progress)
    catalog = Catalog(
        ports.files,
        ports.locks,
        ports.clock,
        store,
        lock_timeout_ms=config.lock_timeout_ms,
        default_store=os.environ.get("MNEMON_STORE", "").strip() or None,
        write_enabled=config.write_enabled,
        new_id=(ports.ids or RandomIds()).new_id,
    )
    facade = LongTermMemory(
        catalog,
        store,
        delegate,
        write_enabled=config.write_enabled,
        default_limit=config.default_recall_limit,
    )
    return facade, owned


class MemoryRoot:
    """One storage root: hot memory (``runtime/``), long-term Memory Spaces (``data/``) and
    project Documents (``documents/``)."""

    def __init__(
        self,
        path: Path | None,
        config: Config,
        ports: Ports,
        progress: Progress | None = None,
        *,
        backend: PgBackend | None = None,
        location: str | None = None,
    ) -> None:
        """Use :meth:`open`. ``path`` is the root's directory, None for a root on PostgreSQL
        (``backend``, which the root closes when it closes; ``location``, its URL without a
        password)."""
        if config.documents_index == "auto":  # see Config: journal where no one else reads
            index: DocumentIndex = "file" if path is not None else "journal"
            config = attrs.evolve(config, documents_index=index)
        self.path, self.config = path, config
        self._backend = backend
        #: Where the root lives, for people: its directory, or its URL without a password.
        self.location = location or (path.as_posix() if path is not None else "")
        self._ports = ports
        self._progress = progress
        self._events = Events(ports.clock.now_ms)
        self._delegate = Delegate(
            ports.workers or BuiltinWorkers(), ports.clock, config.worker_timeout, self._events
        )
        self._shared = _Shared(ports, config, self._delegate)
        history = HotHistory(ports.files)
        self._flow = HotMutationFlow(ports, config, self._shared.cache, history)
        self._long_term: LongTermMemory | None = None
        self._owned_store: LongTermStore | None = None  # the store this root opened itself
        journal = Journal(ports.files, ports.locks, config.lock_timeout_ms)
        self._maintenance = MaintenanceFlow(
            self._flow,
            self._shared.mutex,
            self._shared.current,
            config,
            ports.clock,
            self._delegate,
            lambda: self.long_term,
            journal,
        )
        self.hot = HotMemory(self._shared, self._flow, self._maintenance, history)
        self.context = Context(self._shared, self._flow)
        self._lifecycles: dict[str, AgentLifecycle] = {}
        self.documents = Documents(
            ports.files,
            ports.locks,
            ports.clock,
            config,
            self.location,
            lambda: self.long_term,
            self._delegate,
            (ports.ids or RandomIds()).new_id,
        )
        self._tools = AgentTools(self.hot, lambda: self.long_term, self.documents, config)
        self._audit: AuditLog | None = None
        if config.audit != "off" and config.write_enabled:
            self._audit = AuditLog(
                ports.files, ports.locks, ports.clock, content=config.audit == "content"
            )
        self._audited(self._flow, self._maintenance, self.documents._flow, self.documents._search)

    def _audited(self, *contexts: FlowContext) -> None:
        """Tell ``contexts``' transitions and outcomes to the root's audit log."""
        for context in contexts:
            context.audit = self._audit

    def audit_tail(self, limit: int = 100, *, flow: str | None = None) -> list[AuditRecord]:
        """The newest ``limit`` records of the root's audit log (every process's, this one's
        buffered lines included), oldest first; of ``flow`` only when given."""
        if self._audit is not None:
            self._audit.flush()
        return read_audit(self._ports.files, limit, flow)

    @property
    def tools(self) -> AgentTools:
        """The memory tools for the host's main agent: definitions for each model API and one
        dispatcher (:class:`~mnemon_sm.agent_tools.AgentTools`)."""
        return self._tools

    @property
    def events(self) -> Events:
        """What happens in this root, as log records under the ``mnemon_sm`` logger and as
        events for hooks: ``root.events.subscribe(hook, kinds=None)`` (see
        :mod:`mnemon_sm.observe`)."""
        return self._events

    @host_only
    def lifecycle(self, agent_id: str) -> AgentLifecycle:
        """The lifecycle of root agent ``agent_id`` (restored from ``state/`` if persisted).

        Raises:
            InvalidInput: a bad agent id. CorruptStore: its persisted state is invalid.
        """
        with self._shared.mutex:
            found = self._lifecycles.get(agent_id)
            if found is None:
                found = AgentLifecycle(
                    agent_id,
                    self._ports.files,
                    self._ports.locks,
                    self._ports.clock,
                    self.config,
                    self._delegate,
                    self.hot,
                    self.documents,
                    lambda: self.long_term,
                    self._audit,
                )
                self._lifecycles[agent_id] = found
            return found

    @host_only
    def agents(self) -> tuple[str, ...]:
        """The root agents whose lifecycle state is persisted in ``state/lifecycle/``, sorted."""
        return agent_ids(self._ports.files)

    @host_only
    def agent_status(self, agent_id: str) -> dict[str, Any]:
        """Root agent ``agent_id``'s lifecycle status (``AgentLifecycle.status``) as persisted
        now. On a writable root it is the agent's own facade, refreshed from its file; on a
        read-only root (whose facades keep what hooks change in memory) a new read of the
        file each time, so a reader such as ``mnemon-sm inspect`` follows the writers.

        Raises:
            InvalidInput: a bad agent id. CorruptStore: its persisted state is invalid.
        """
        if self.config.write_enabled:
            return self.lifecycle(agent_id).status()
        p = self._ports
        with self._shared.mutex:
            view = AgentLifecycle(
                agent_id,
                p.files,
                p.locks,
                p.clock,
                self.config,
                self._delegate,
                self.hot,
                self.documents,
                lambda: self.long_term,
            )
        return view.status()

    @host_only
    def reset_lifecycle(self, agent_id: str) -> LifecycleReset:
        """Reset root agent ``agent_id``'s lifecycle, even when its persisted state cannot be
        read (where :meth:`lifecycle` raises ``CorruptStore``): its state file is moved aside
        to ``state/lifecycle/<agent id>.json.bad-<epoch ms>`` (``.reset-`` when it was
        readable) and the agent starts anew. Returns what it did (``reset`` false when the
        agent had no state file).

        Raises:
            InvalidInput: a bad agent id. ReadOnly: ``writeEnabled = false``.
        """
        with self._shared.mutex:
            p = self._ports
            return AgentLifecycle.reset(agent_id, p.files, p.locks, p.clock, self.config)

    @property
    def long_term(self) -> LongTermMemory:
        """The Memory Spaces of this root (opened on first use)."""
        with self._shared.mutex:
            if self._long_term is None:
                self._long_term, self._owned_store = _open_long_term(
                    self.path,
                    self.config,
                    self._ports,
                    self._delegate,
                    self._progress,
                    self._backend,
                )
                lt = self._long_term
                self._audited(
                    lt._recall, lt._direct, lt._agent, lt._write, lt._merge, lt._spaces, lt._upkeep
                )
            return self._long_term

    @classmethod
    def open(
        cls,
        path: str | Path,
        config: Config | None = None,
        *,
        ports: Ports | None = None,
        workers: Workers | None = None,
        embedder: Embedder | None = None,
        progress: Progress | None = None,
    ) -> MemoryRoot:
        """Open (creating if needed) the storage root at ``path`` and repair it.

        Args:
            path: the root directory (``~`` is expanded), or a root on a PostgreSQL server:
                ``postgresql://user@host/db?root=NAME`` (the ``postgres`` extra; several
                roots share a database). Memory Spaces of such a root are not stored on
                PostgreSQL yet: pass a long-term store in ``ports`` to use them.
            config: settings; defaults to ``Config()``.
            ports: adapters to use instead of the real ones (tests, embedding).
            workers: the LLM workers to use (default: the built-in deterministic ones).
            embedder: dense retrieval for relevance recall (default: the one
                ``config.embedding_model`` names, else none: lexical only).
            progress: told ``(what, done, total)`` during long rebuilds (a Memory Space's
                side index rebuilt from scratch), for a progress bar.

        Raises:
            LockTimeout, StorageError: the root cannot be used. A corrupt ``memories.json``
            does not prevent opening; every operation then raises ``CorruptStore``.
        """
        backend: PgBackend | None = None
        root: Path | None = None
        location: str | None = None
        if is_postgres_url(path):
            location = redacted(str(path))
            if ports is None:
                backend = PgBackend(str(path))
                ports = Ports(
                    files=backend.files, locks=backend.locks, clock=SystemClock(), ids=RandomIds()
                )
        else:
            root = Path(path).expanduser()
            ports = ports or real_ports(root)
        assert ports is not None
        if workers is not None:
            ports = attrs.evolve(ports, workers=workers)
        if embedder is not None:
            ports = attrs.evolve(ports, embedder=embedder)
        try:
            return cls(
                root, config or Config(), ports, progress, backend=backend, location=location
            )
        except BaseException:
            if backend is not None:
                backend.close()
            raise

    @host_only
    def close(self) -> None:
        """Close the root; later operations raise ``IllegalEvent``.

        The long-term store the root opened itself is closed too (its SQLite connections and
        the descriptors that pin its files), so a closed root holds no file descriptor. A
        store passed in ``ports.long_term`` is left open: the caller opened it, the caller
        closes it.
        """
        with self._shared.mutex:
            try:
                if self.config.projections == "lazy":  # leave the files as committed
                    self._shared.bring_projections_up_to_date(self._flow)
                self._flow.close()
                self._maintenance.close()
                self.documents.close()
                if self._long_term is not None:
                    self._long_term.close()
            finally:
                store, self._owned_store = self._owned_store, None
                if isinstance(store, EmbeddedStore):  # the Mnemon CLI adapter holds nothing open
                    store.close(checkpoint=False)  # see EmbeddedStore.close
                if self._audit is not None:
                    self._audit.flush()
                if self._backend is not None:
                    self._backend.close()

    def __enter__(self) -> MemoryRoot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
