"""The packaged embedding model: offline, verified, normalised, order-preserving."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tribal_memory.base.errors import EmbeddingError
from tribal_memory.embeddings.fastembed import (
    PACKAGED_ONNX_SHA256,
    FastEmbedEmbedder,
    _sha256,
    packaged_model_dir,
)


def test_packaged_model_is_verified_and_complete(tmp_path: Path) -> None:
    directory = packaged_model_dir(tmp_path)
    assert _sha256(directory / "model.onnx") == PACKAGED_ONNX_SHA256
    for name in (
        "tokenizer.json",
        "tokenizer_config.json",
        "config.json",
        "special_tokens_map.json",
    ):
        assert (directory / name).is_file()


def test_a_stale_model_link_is_replaced_and_nothing_is_left_behind(tmp_path: Path) -> None:
    directory = packaged_model_dir(tmp_path)
    # What a removed virtual environment leaves: a link to a file that is gone.
    (directory / "model.onnx").unlink()
    (directory / "model.onnx").symlink_to(tmp_path / "gone" / "model.onnx")
    assert packaged_model_dir(tmp_path) == directory
    assert _sha256(directory / "model.onnx") == PACKAGED_ONNX_SHA256
    assert not [p.name for p in directory.iterdir() if p.name.startswith(".")]


def test_each_installation_has_its_own_model_directory(tmp_path: Path) -> None:
    directory = packaged_model_dir(tmp_path)
    # Another installation's directory (its links point elsewhere) is never relinked:
    # processes of that installation may be loading from it.
    other = tmp_path / f"minilm-{PACKAGED_ONNX_SHA256[:16]}-00000000"
    other.mkdir()
    (other / "model.onnx").symlink_to(tmp_path / "elsewhere.onnx")
    assert directory != other and directory.name.startswith(f"minilm-{PACKAGED_ONNX_SHA256[:16]}-")
    packaged_model_dir(tmp_path)
    assert (other / "model.onnx").readlink() == tmp_path / "elsewhere.onnx"


def test_vectors_are_unit_length_and_semantic(embedder: FastEmbedEmbedder) -> None:
    vectors = embedder.embed_batch(
        ["I like green tea", "My favourite drink is matcha", "The server crashed on Friday"]
    )
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    similarity = vectors @ vectors.T
    assert similarity[0, 1] > similarity[0, 2] + 0.2


def test_batch_order_matches_single_embeddings(embedder: FastEmbedEmbedder) -> None:
    texts = ["short", "a much longer sentence about the weather in Lisbon in May " * 3, "mid size"]
    batch = embedder.embed_batch(texts)
    singles = np.stack([embedder.embed(t) for t in texts])
    assert np.allclose(batch, singles, atol=1e-4)


def test_empty_batch_has_model_dimension(embedder: FastEmbedEmbedder) -> None:
    assert embedder.embed_batch([]).shape == (0, 384)


def test_missing_local_model_dir_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingError, match="model.onnx"):
        FastEmbedEmbedder(str(tmp_path))


def test_query_session_with_its_own_threads_gives_the_same_vectors(
    embedder: FastEmbedEmbedder,
) -> None:
    separate = FastEmbedEmbedder(threads=2, query_threads=1)
    assert separate._query_model is not separate._model
    questions = ["Where does Priya live now?", "which database did the team pick for billing"]
    for question in questions:
        expected = embedder.embed(question, query=True)
        np.testing.assert_allclose(separate.embed(question, query=True), expected, atol=1e-5)
    batch = separate.embed_batch(questions)
    np.testing.assert_allclose(batch, embedder.embed_batch(questions), atol=1e-5)
