"""The embedded long-term store: Mnemon-compatible SQLite, no service to run.

Public surface: :class:`EmbeddedStore` (the ``LongTermStore`` adapter). The modules below it
own one concern each: ``store`` (the port and the spaces of a root), ``handles`` (one open
store: connection, lock, transactions), ``schema`` (Mnemon's ``mnemon.db``), ``sideindex`` (our
rebuildable candidate index next to it), ``tokens``, ``recall`` and ``scan`` (pure text
analysis, scoring and the full-scan reference), ``checks`` (argument validation), ``writes``,
``edges``, ``decay`` and ``tx`` (the write path), ``reads`` and ``rows`` (the read path).
"""

from .store import EmbeddedStore

__all__ = ["EmbeddedStore"]
