"""Context of ``specs/store_upkeep.yaml``: bulk import, vector backfill, side-index rebuild.

Each is a run of steps, one entry action per step: a bulk import checks every item and finds
its target (``preparing``), then writes one batch per step (``importing``); a backfill or a
rebuild lists the spaces on its first step, then works on one space per step (``embedding``,
``indexing``). A step holds the service's mutex only while it runs, so other long-term
operations of the root go between two steps, as they did between two batches before these
runs were steps.

A run's data travels with its events
------------------------------------
What a run knows (what is left to do, what was done, the caller's progress callback) is one
frozen :class:`UpkeepRun`, passed as the ``run`` argument of the event that ends each step.
The edge out of a step is chosen by the pure guard :meth:`UpkeepFlow.has_more`: first match,
the same state again while work is left, else ``idle`` through :meth:`UpkeepFlow.finish`,
which answers the run's result. A failure is the step's own outcome event and ends the run
with what earlier steps stored kept; an exception (a progress callback's included) aborts it.

The validators are pure: the batch size, a read-only root, whether the store can compute
vectors or keeps a side index (its type and the configuration only).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from mnemon_sm.engine.flow import Machine
from mnemon_sm.engine.registry import flow_context
from mnemon_sm.errors import InvalidInput, MnemonError
from mnemon_sm.flows.long_term.catalog import Space
from mnemon_sm.flows.long_term.write import WritingContext

__all__ = ["BackfillRun", "ImportReceipt", "ImportRun", "RebuildRun", "UpkeepFlow", "UpkeepRun"]


@attrs.frozen
class UpkeepRun:
    """One bulk run: what it has to do (``todo``), how much of it is done, and the caller's
    progress callback. Each kind of run says what its result is."""

    todo: tuple[Any, ...]
    progress: Callable[..., None] | None
    done: int = 0

    def result(self) -> Any:
        raise NotImplementedError


@attrs.frozen(kw_only=True)
class ImportRun(UpkeepRun):
    """A bulk import: ``todo`` holds the checked drafts, ``batch`` of them per step."""

    target: Space
    batch: int
    ids: tuple[str, ...] = ()
    imported: int = 0
    skipped: int = 0

    def next(self) -> tuple[Any, ...]:
        return self.todo[self.done : self.done + self.batch]

    def result(self) -> ImportReceipt:
        return ImportReceipt(
            self.target.id, self.target.name, self.imported, self.skipped, self.ids
        )


@attrs.frozen
class ImportReceipt:
    """What a bulk import (``remember_many``) stored: into which space, how many memories
    were imported and how many skipped as already stored, and the ids of the imported ones."""

    memory_body_id: str
    memory_body_name: str
    imported: int
    skipped: int
    ids: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """``{"memoryBodyId", "memoryBodyName", "imported", "skipped", "ids"}``."""
        return {
            "memoryBodyId": self.memory_body_id,
            "memoryBodyName": self.memory_body_name,
            "imported": self.imported,
            "skipped": self.skipped,
            "ids": list(self.ids),
        }


@attrs.frozen
class BackfillRun(UpkeepRun):
    """A vector backfill: ``todo`` holds space ids; the result is how many were embedded."""

    embedded: int = 0

    def result(self) -> int:
        return self.embedded


@attrs.frozen
class RebuildRun(UpkeepRun):
    """A side-index rebuild: ``todo`` holds space ids, which are the result."""

    def result(self) -> list[str]:
        return list(self.todo)


@flow_context("UpkeepFlow")
class UpkeepFlow(WritingContext):
    FLOW = "store_upkeep"

    # -- validators and guards (pure) ------------------------------------------------------

    def check_import(self, request: Mapping[str, Any]) -> None:
        batch = request.get("batch")
        if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= 10_000:
            raise InvalidInput("batch must be an integer from 1 to 10000")

    def check_backfill(self) -> None:
        """The store computes vectors with a configured embedder."""
        self.service.check_dense_backfill()

    def check_side_index(self) -> None:
        """The store keeps a side index."""
        self.service.check_side_index()

    def has_more(self, run: UpkeepRun) -> bool:
        return run.done < len(run.todo)

    def finish(self, run: UpkeepRun) -> None:
        """Action of the edge that ends a run: its result."""
        self.answer(run.result())

    # -- steps -----------------------------------------------------------------------------

    def prepare_import(self, machine: Machine, request: Mapping[str, Any]) -> None:
        """Entry of ``preparing`` (entered only by ``import_items``)."""
        try:
            with self.service.mutex:
                target, drafts = self.service.prepare_import(request["items"], request["space"])
        except MnemonError as exc:
            return self.refuse(machine, "import_refused", exc)
        run = ImportRun(drafts, request["progress"], target=target, batch=request["batch"])
        machine.raise_("import_prepared", run=run)

    def import_batch(self, machine: Machine, run: ImportRun) -> None:
        """Entry of ``importing``: one batch in one transaction."""
        try:
            with self.service.mutex:
                report = self.service.import_chunk(run.target, run.next())
        except MnemonError as exc:
            return self.refuse(machine, "import_failed", exc)
        run = attrs.evolve(
            run,
            done=run.done + len(run.next()),
            ids=run.ids + tuple(report.ids),
            imported=run.imported + report.imported,
            skipped=run.skipped + report.skipped,
        )
        if run.progress is not None:
            run.progress(len(run.ids), len(run.todo))
        machine.raise_("batch_imported", run=run)

    def embed_space(
        self,
        machine: Machine,
        request: Mapping[str, Any] | None = None,
        run: BackfillRun | None = None,
    ) -> None:
        """Entry of ``embedding``: the spaces on the first step, then one space per step."""
        try:
            if run is None:  # the first step, entered by ``embed_missing``
                run = BackfillRun(self._space_ids(None), _progress(request))
            if run.todo:
                space_id = run.todo[run.done]
                progress = run.progress

                def report(done: int, of: int) -> None:
                    if progress is not None:
                        progress(space_id, done, of)

                count = self.service.embed_missing(space_id, progress=report)
                run = attrs.evolve(run, done=run.done + 1, embedded=run.embedded + count)
        except MnemonError as exc:
            return self.refuse(machine, "embedding_failed", exc)
        machine.raise_("space_embedded", run=run)

    def index_space(
        self,
        machine: Machine,
        request: Mapping[str, Any] | None = None,
        run: RebuildRun | None = None,
    ) -> None:
        """Entry of ``indexing``: the spaces on the first step, then one space per step."""
        try:
            if run is None:  # the first step, entered by ``rebuild_index``
                space = None if request is None else request.get("space")
                run = RebuildRun(self._space_ids(space), None)
            if run.todo:
                self.service.rebuild_index(run.todo[run.done])
                run = attrs.evolve(run, done=run.done + 1)
        except MnemonError as exc:
            return self.refuse(machine, "indexing_failed", exc)
        machine.raise_("space_indexed", run=run)

    def _space_ids(self, space: str | None) -> tuple[str, ...]:
        """The id of ``space``, or of every space (a catalog read)."""
        with self.service.mutex:
            spaces = [self.service.space(space)] if space else self.service.spaces()
        return tuple(s.id for s in spaces)


def _progress(request: Mapping[str, Any] | None) -> Callable[..., None] | None:
    return None if request is None else request.get("progress")
