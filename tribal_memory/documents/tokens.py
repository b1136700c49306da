"""Token counts with the packaged embedding model's own tokenizer.

Chunk sizes are measured in the WordPiece tokens of all-MiniLM-L6-v2
(``tribal_memory/_model/tokenizer.json``, loaded with Hugging Face
``tokenizers``), without the ``[CLS]``/``[SEP]`` the model adds around every
text. The packaged tokenizer is used whatever ``embedding_model`` is set to.

How much of a chunk the embedding sees: fastembed truncates every input to the
tokenizer's ``model_max_length``, 256 tokens for this model including
``[CLS]`` and ``[SEP]``, so the vector of a chunk reflects its first
:data:`EMBEDDED_TEXT_TOKENS` (254) tokens. Full-text (BM25) search indexes the
whole chunk. With the default ``chunk_tokens`` of 512, the vector covers about
the first half of a full chunk and BM25 all of it.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from tokenizers import Tokenizer

from tribal_memory.base.errors import EmbeddingError

TOKENIZER_PATH = Path(__file__).resolve().parent.parent / "_model" / "tokenizer.json"
EMBEDDED_TEXT_TOKENS = 254
"""Tokens of a text the default model embeds: 256 minus ``[CLS]`` and ``[SEP]``."""


@lru_cache(maxsize=1)
def model_tokenizer() -> Tokenizer:
    """The packaged tokenizer, without truncation or padding (loaded once per process).

    Raises:
        EmbeddingError: the tokenizer file is missing or unreadable (a broken install).
    """
    try:
        tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
    except Exception as exc:  # noqa: BLE001 - tokenizers raises a bare Exception
        raise EmbeddingError(f"cannot load the tokenizer {TOKENIZER_PATH}: {exc}") from exc
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def token_offsets(text: str) -> list[tuple[int, int]]:
    """Character spans ``(start, end)`` of the tokens of ``text``, in order.

    Special tokens are not included. Every span lies inside one
    whitespace-separated word (the tokenizer splits at whitespace and
    punctuation first); characters the tokenizer drops (control characters)
    belong to no span. An empty or blank text gives [].
    """
    return list(model_tokenizer().encode(text, add_special_tokens=False).offsets)


def count_tokens(text: str) -> int:
    """Number of model tokens in ``text``, special tokens not counted (0 for blank text)."""
    return len(model_tokenizer().encode(text, add_special_tokens=False).ids)
