"""The ``Embedder`` port: texts in, unit vectors out, for dense retrieval (optional).

Theory of operation
-------------------
An embedder maps each text to a point of a ``dimensions``-dimensional space so that texts with
similar meaning land close together. Rows are L2-normalised, so the cosine similarity of two
texts is the dot product of their rows. The long-term store uses the vectors only to *rank*
candidates; every fact it returns still comes from the insight itself.

The embedder is untrusted, like any external component (a worker, the Mnemon CLI): a model can
be missing, fail, be interrupted half-way, or return garbage (NaN, a wrong shape, a zero row,
something that is not an array at all). So no code calls :meth:`Embedder.embed` directly:
every call goes through :func:`~mnemon_sm.ports.embedder_checks.embed_checked`, which turns an
``Exception`` into ``EmbeddingFailed`` and accepts only exactly ``(len(texts), dimensions)``
finite, non-zero rows, renormalised and copied. ``BaseException`` (``KeyboardInterrupt``,
``SystemExit``) passes through untouched: nobody may swallow a request to stop.

``model_id`` names what produced a vector: the model, its dimensions and, where the adapter can
compute it, a content hash of the model's configuration. The store keeps it next to every
vector and discards vectors stored under another id, so changing the model, its size or its
configuration never mixes two incomparable spaces; the vectors are simply computed again.

Adapters: :class:`~mnemon_sm.adapters.sentence.SentenceTransformerEmbedder` (a local
sentence-transformers model; the ``[embeddings]`` extra), and for tests
:class:`~mnemon_sm.testing.embed.FakeEmbedder` (deterministic feature hashing, no model) and
:class:`~mnemon_sm.testing.embed.FaultyEmbedder` (injects each defect the checks must catch).
An adapter must be safe to call from several threads at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeAlias, runtime_checkable

import numpy
import numpy.typing

__all__ = ["Embedder", "Vectors"]

Vectors: TypeAlias = numpy.typing.NDArray[numpy.float32]
"""A float32 matrix with one L2-normalised row per text."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit vectors. See the module's theory of operation."""

    @property
    def model_id(self) -> str:
        """Names the model and its dimensions (and a content hash of its configuration where
        available); vectors stored under another id are discarded by the store."""
        ...

    @property
    def dimensions(self) -> int:
        """The length of every vector this embedder returns."""
        ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """One row per text, in order: float32, shape ``(len(texts), dimensions)``, rows
        L2-normalised. Callers go through ``embed_checked``, which does not trust this."""
        ...
