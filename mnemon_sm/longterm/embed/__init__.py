"""Embeddings for dense retrieval (optional): the ``Embedder`` port, the host's checks on it,
and the sentence-transformers adapter.

Public surface: :class:`Embedder` and :data:`Vectors` (``port``), :func:`embed_checked` and
:func:`checked_vectors` (``check``: the only way the host calls an embedder),
:class:`SentenceTransformerEmbedder` (``sentence``; needs the ``[embeddings]`` extra, imported
only when one is built). Test adapters live in :mod:`mnemon_sm.testing.embed`.
"""

from .check import checked_vectors, embed_checked
from .port import Embedder, Vectors
from .sentence import SentenceTransformerEmbedder

__all__ = [
    "Embedder",
    "SentenceTransformerEmbedder",
    "Vectors",
    "checked_vectors",
    "embed_checked",
]
