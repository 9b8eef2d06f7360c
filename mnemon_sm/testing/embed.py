"""Embedders for tests: a deterministic fake, and a wrapper that injects defects.

:class:`FakeEmbedder` needs no model and no randomness. A text becomes its lowercase words
(``[^\\W_]+``), each mapped through ``synonyms`` (so ``{"gf": "girlfriend"}`` makes the two
words one), then crudely stemmed (one of ``ing``, ``es``, ``ed``, ``s``, then a final ``e``,
while at least three letters stay). Every word adds a signed feature hashed with BLAKE2b into
``dimensions`` buckets, plus its character trigrams (``#word#``) at a lower total weight, so a
misspelling stays close to the right word. The sum is L2-normalised; a text with no words (or
whose features cancel out) gets one fixed unit vector. Equal texts give equal vectors in every
process; texts sharing words score high; unrelated texts score near zero, give or take hash
collisions (fewer with more dimensions).

:class:`FaultyEmbedder` wraps any embedder and misbehaves at chosen call numbers (counted from
0) in one of the ways listed in :data:`EMBEDDER_DEFECTS`: raise a ``RuntimeError``, raise a
``KeyboardInterrupt``, or return bad data (a NaN, a row too few, a column too few, a zero row,
a dict instead of an array). The data defects start from the inner embedder's real vectors and
assume a non-empty batch, which is all ``embed_checked`` ever sends. Both record every call.
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal, cast, get_args

import numpy
from numpy.typing import NDArray

from mnemon_sm.errors import InvalidConfig
from mnemon_sm.ports.embedder import Embedder, Vectors

__all__ = ["EMBEDDER_DEFECTS", "EmbedderDefect", "FakeEmbedder", "FaultyEmbedder"]

EmbedderDefect = Literal[
    "raise", "nan", "wrong_shape", "wrong_dims", "zero", "not_array", "interrupt"
]
EMBEDDER_DEFECTS: tuple[EmbedderDefect, ...] = get_args(EmbedderDefect)

_WORD = re.compile(r"[^\W_]+")
_SUFFIXES = ("ing", "es", "ed", "s")
_MIN_STEM = 3
_WORD_WEIGHT = 1.0
_TRIGRAM_WEIGHT = 0.7  # the total (L2) weight of one word's trigrams
_EMPTY = "empty text"


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= _MIN_STEM:
            word = word[: -len(suffix)]
            break
    if word.endswith("e") and len(word) - 1 >= _MIN_STEM:
        word = word[:-1]
    return word


def _trigrams(word: str) -> list[str]:
    padded = f"#{word}#"
    return [padded[i : i + 3] for i in range(len(padded) - 2)]


def _dimensions(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidConfig(f"dimensions must be a positive int, got {value!r}")
    return value


class FakeEmbedder:
    """Deterministic feature-hashing embedder (see the module docstring). ``calls`` holds the
    texts of every ``embed`` call, in order."""

    def __init__(self, dimensions: int = 64, synonyms: Mapping[str, str] | None = None) -> None:
        self._dimensions = _dimensions(dimensions)
        self.synonyms = {
            key.lower(): tuple(_WORD.findall(value.lower()))
            for key, value in (synonyms or {}).items()
        }
        self.calls: list[tuple[str, ...]] = []
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return f"fake/{self._dimensions}"

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def words(self, text: str) -> list[str]:
        """The stemmed words of ``text`` after synonym mapping (what the vector is made of)."""
        out: list[str] = []
        for word in _WORD.findall(text.lower()):
            out.extend(_stem(w) for w in self.synonyms.get(word, (word,)))
        return out

    def _add(self, vector: NDArray[numpy.float64], feature: str, w: float) -> None:
        digest = hashlib.blake2b(feature.encode("utf-8", "surrogatepass"), digest_size=8).digest()
        index = int.from_bytes(digest[:7], "big") % self._dimensions
        vector[index] += w if digest[7] & 1 else -w

    def vector(self, text: str) -> Vectors:
        """One text's unit vector."""
        vector = numpy.zeros(self._dimensions, dtype=numpy.float64)
        for word in self.words(text):
            self._add(vector, f"w:{word}", _WORD_WEIGHT)
            trigrams = _trigrams(word)
            weight = _TRIGRAM_WEIGHT / math.sqrt(len(trigrams))
            for trigram in trigrams:
                self._add(vector, f"t:{trigram}", weight)
        norm = float(numpy.linalg.norm(vector))
        if norm < 1e-9:  # no words, or features that cancelled out
            vector[:] = 0.0
            self._add(vector, _EMPTY, 1.0)
            norm = 1.0
        return (vector / norm).astype(numpy.float32)

    def embed(self, texts: Sequence[str]) -> Vectors:
        batch = tuple(texts)
        with self._lock:
            self.calls.append(batch)
        if not batch:
            return numpy.zeros((0, self._dimensions), dtype=numpy.float32)
        return numpy.stack([self.vector(text) for text in batch])


class FaultyEmbedder:
    """Delegates to ``inner`` except at the call numbers in ``fail_at``, where it misbehaves as
    ``kind`` says. ``count`` is the number of calls so far; ``calls`` their texts."""

    def __init__(
        self, inner: Embedder, *, fail_at: Iterable[int] = (), kind: EmbedderDefect = "raise"
    ) -> None:
        if kind not in EMBEDDER_DEFECTS:
            raise InvalidConfig(f"unknown embedder defect {kind!r}")
        self.inner = inner
        self.fail_at = frozenset(fail_at)
        self.kind: EmbedderDefect = kind
        self.count = 0
        self.calls: list[tuple[str, ...]] = []
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    def embed(self, texts: Sequence[str]) -> Vectors:
        batch = tuple(texts)
        with self._lock:
            index = self.count
            self.count += 1
            self.calls.append(batch)
        if index not in self.fail_at:
            return self.inner.embed(list(batch))
        if self.kind == "raise":
            raise RuntimeError(f"injected embedder failure (call {index})")
        if self.kind == "interrupt":
            raise KeyboardInterrupt(f"injected interrupt (call {index})")
        good = numpy.array(self.inner.embed(list(batch)), dtype=numpy.float32)
        return cast(Vectors, self._defect(good))  # bad data, on purpose

    def _defect(self, good: Vectors) -> object:
        if self.kind == "nan":
            good[0, 0] = numpy.nan
            return good
        if self.kind == "wrong_shape":
            return good[:-1]
        if self.kind == "wrong_dims":
            return good[:, :-1]
        if self.kind == "zero":
            good[-1] = 0.0
            return good
        return {"embeddings": good.tolist()}  # not_array: a JSON-ish payload, not an array
