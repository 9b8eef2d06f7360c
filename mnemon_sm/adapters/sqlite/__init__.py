"""The embedded long-term store: Mnemon-compatible SQLite, no service to run.

Public surface: :class:`EmbeddedStore` (the ``LongTermStore`` adapter). The modules below it
own one concern each: ``store`` (the port and the spaces of a root), ``handles`` (one open
store: connection, lock, transactions), ``pin`` (opening it without following a symlink),
``drafts`` (new stores' drafts and their clean-up), ``schema`` (Mnemon's ``mnemon.db``),
``sideindex`` (our rebuildable candidate index next to it), ``lexical`` (the analyzer, query
expansion and normalised BM25 of relevance recall), ``vectors`` (dense retrieval's stored and
in-memory vectors), ``tokens``, ``recall`` and ``scan`` (Mnemon's text analysis and smart
scoring, pure, and the full-scan reference), ``writes``, ``edges``, ``decay`` and ``tx`` (the
write path), ``reads`` and ``rows`` (the read path), ``replica`` (a store kept as the replica
of an upstream that holds the truth: change capture and apply). The ranking rule itself is
:mod:`..ranking`.
"""

from mnemon_sm.adapters.sqlite.store import EmbeddedStore

__all__ = ["EmbeddedStore"]
