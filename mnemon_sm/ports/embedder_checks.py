"""The host's checks on whatever an embedder returns (pure; no model, no I/O).

:func:`checked_vectors` accepts only a numeric array-like of exactly ``(count, dimensions)``,
every value finite, every row with a non-zero norm, and returns a float32 copy with each row
L2-normalised again (so an adapter's rounding, or a model that forgot to normalise, does not
skew cosine scores). Anything else is ``EmbeddingFailed`` with a short message naming the
problem: a shape, a dtype, a row number, never a vector's values or the texts.

:func:`embed_checked` is the only way the host calls an embedder: it hands over a fresh list,
turns any ``Exception`` (from ``embed`` or from reading ``dimensions``) into
``EmbeddingFailed`` with the original as ``__cause__``, and checks the result. A
``BaseException`` that is not an ``Exception`` (``KeyboardInterrupt``, ``SystemExit``, a
simulated crash) propagates unchanged. An empty batch never reaches the embedder.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import SupportsIndex

import numpy

from mnemon_sm.errors import EmbeddingFailed, InvalidInput
from mnemon_sm.ports.embedder import Embedder, Vectors

__all__ = ["checked_vectors", "embed_checked"]

_NUMERIC_KINDS = frozenset("iuf")  # signed, unsigned, float; not bool, complex, object, text


def _declared_dimensions(value: object) -> int:
    """The embedder's ``dimensions`` as a positive int, or ``EmbeddingFailed``."""
    if isinstance(value, bool) or not isinstance(value, SupportsIndex):
        raise EmbeddingFailed(f"the embedder declares dimensions of type {type(value).__name__}")
    dimensions = operator.index(value)
    if dimensions < 1:
        raise EmbeddingFailed(f"the embedder declares {dimensions} dimensions")
    return dimensions


def checked_vectors(raw: object, count: int, dimensions: int) -> Vectors:
    """``raw`` as ``count`` float32 unit rows of length ``dimensions`` (always a copy).

    Raises:
        EmbeddingFailed: ``raw`` is not a numeric array-like, has another shape, holds a
            non-finite value or a row of zero norm, or ``dimensions`` is not a positive int.
        ValueError: ``count`` is negative (a programming error of the caller).
    """
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    dimensions = _declared_dimensions(dimensions)
    if isinstance(raw, str | bytes | bytearray | memoryview):
        raise EmbeddingFailed(f"embedder returned {type(raw).__name__}, not an array")
    try:
        array = numpy.asarray(raw)
    except Exception:  # ragged nesting, or an __array__ that raises: not an array either
        raise EmbeddingFailed(
            f"embedder returned {type(raw).__name__}, not a rectangular array"
        ) from None
    if array.dtype.kind not in _NUMERIC_KINDS:
        raise EmbeddingFailed(
            f"embedder returned {type(raw).__name__} of dtype {array.dtype.name},"
            " not a numeric array"
        )
    if array.shape != (count, dimensions):
        raise EmbeddingFailed(
            f"embedder returned shape {array.shape}, expected ({count}, {dimensions})"
        )
    values = numpy.array(array, dtype=numpy.float64)  # a copy: the embedder keeps no alias
    finite = numpy.isfinite(values)
    if not finite.all():
        row = int(numpy.argmin(finite.all(axis=1)))
        raise EmbeddingFailed(f"embedder returned a non-finite value (row {row})")
    # Scale each row by its largest magnitude first, so huge or tiny values cannot overflow or
    # underflow the norm.
    scale = numpy.abs(values).max(axis=1, keepdims=True)
    zero = scale[:, 0] == 0
    if zero.any():
        raise EmbeddingFailed(f"embedder returned a zero vector (row {int(numpy.argmax(zero))})")
    values /= scale
    values /= numpy.linalg.norm(values, axis=1, keepdims=True)
    return values.astype(numpy.float32)


def embed_checked(embedder: Embedder, texts: Iterable[str]) -> Vectors:
    """Embed ``texts`` through ``embedder`` and check the result (see the module docstring).

    Raises:
        EmbeddingFailed: the embedder raised an ``Exception`` (it is ``__cause__``) or returned
            something :func:`checked_vectors` refuses.
        InvalidInput: ``texts`` is a string or holds something that is not a string.
    """
    if isinstance(texts, str):
        raise InvalidInput("texts must be a sequence of strings, not one string")
    batch = list(texts)
    for text in batch:
        if not isinstance(text, str):
            raise InvalidInput(f"texts must be strings, not {type(text).__name__}")
    try:
        declared: object = embedder.dimensions
    except Exception as exc:
        raise EmbeddingFailed(
            f"reading the embedder's dimensions raised {type(exc).__name__}"
        ) from exc
    dimensions = _declared_dimensions(declared)
    if not batch:
        return numpy.zeros((0, dimensions), dtype=numpy.float32)
    try:
        raw: object = embedder.embed(list(batch))
    except Exception as exc:
        raise EmbeddingFailed(
            f"embedder raised {type(exc).__name__} on a batch of {len(batch)} texts"
        ) from exc
    return checked_vectors(raw, len(batch), dimensions)
