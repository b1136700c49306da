"""Cold-retrieval sweep on a LoCoMo-format file: which hybrid configuration to ship.

Usage: ``python benchmarks/cold_sweep.py [PATH] [--out FILE] [--grid JSON]``

Each conversation is ingested once into a real store. Per question it caches
the cosine of every turn under each embedding the grid names (:data:`TURN_TEXTS`:
the content as stored, without its date prefix, with the previous turn or both
adjacent turns of its session as context) and each query text it names
(:data:`QUERY_TEXTS`: the question, or its content words only), and the
server's BM25 (LanceDB full-text search) top 200, then re-ranks those under
every setting of the grid the way :mod:`tribal_memory.retrieval` does:
normalisation (``max``: clipped cosine and BM25 over the best; ``min-max``),
vector weight, candidate pool per path, neighbour weight (smoothing with the
adjacent turns of the same session among the candidates).

Settings are chosen on the odd-numbered questions (the inner split) and
reported on the even-numbered ones and on all; use it on development data
only. The chosen configuration must then be confirmed by ``tribal-memory
bench locomo`` through the server.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tribal_memory.base.config import Settings
from tribal_memory.base.models import MemoryInput, SearchFilters
from tribal_memory.bench.locomo import CATEGORIES
from tribal_memory.bench.metrics import recall_at
from tribal_memory.documents.locomo import load_locomo
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.learned.text import content_terms
from tribal_memory.service.memory_service import MemoryService

DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared/data/locomo-dev.json"
_DATE_PREFIX = re.compile(r"^\[[^\]]*\]\s*")


def _undated(memory: MemoryInput) -> str:
    return _DATE_PREFIX.sub("", memory.content)


def _joined(
    memories: Sequence[MemoryInput], index: int, around: Sequence[int], text: Callable[..., str]
) -> str:
    return "\n".join(text(memories[i]) for i in (*around, index) if i >= 0)


TurnText = Callable[[Sequence[MemoryInput], int, int, int], str]
TURN_TEXTS: dict[str, TurnText] = {
    "content": lambda m, i, before, after: m[i].content,
    "undated": lambda m, i, before, after: _undated(m[i]),
    "with_previous_turn": lambda m, i, before, after: _joined(m, i, [before], lambda x: x.content),
    "undated_with_previous_turn": lambda m, i, before, after: _joined(m, i, [before], _undated),
    "undated_with_adjacent_turns": lambda m, i, before, after: _joined(
        m, i, [before, after], _undated
    ),
}
"""What a turn's embedding is computed from: (turns, index, previous, next) -> text (-1: none)."""
QUERY_TEXTS: dict[str, Callable[[str], str]] = {
    "question": lambda q: q,
    "content_words": lambda q: " ".join(content_terms(q)) or q,
}
"""What the query embedding is computed from."""

GRID = {
    "embedding": ("content", "with_previous_turn"),
    "query": ("question",),
    "normalisation": ("max", "min-max"),
    "vector_weight": (0.3, 0.4, 0.5, 0.6),
    "pool": (50, 100, 150),
    "neighbour_weight": (0.0, 0.2, 0.3, 0.5, 0.8),
}


def collect(path: Path, embeddings: Sequence[str], queries: Sequence[str]) -> list[dict[str, Any]]:
    """Per conversation: turn ids, previous/next turn indexes and per-question scores.

    ``embeddings`` names :data:`TURN_TEXTS`, ``queries`` :data:`QUERY_TEXTS`;
    the cosines are kept per ``"embedding|query"`` pair.
    """
    model = FastEmbedEmbedder()
    conversations = []
    for sample in load_locomo(path):
        memories = list(sample.memories)
        ids = [str(m.metadata["dia_id"]) for m in memories]
        previous = [
            i - 1 if i and memories[i - 1].doc_id == m.doc_id else -1
            for i, m in enumerate(memories)
        ]
        following = [
            i + 1 if i + 1 < len(memories) and memories[i + 1].doc_id == m.doc_id else -1
            for i, m in enumerate(memories)
        ]
        vectors = {
            name: model.embed_batch(
                [
                    TURN_TEXTS[name](memories, i, previous[i], following[i])
                    for i in range(len(memories))
                ]
            )
            for name in embeddings
        }
        questions = [q for q in sample.questions if q.category in CATEGORIES and q.evidence]
        query_vectors = {
            name: model.embed_batch([QUERY_TEXTS[name](q.question) for q in questions], query=True)
            for name in queries
        }
        position = {dia_id: i for i, dia_id in enumerate(ids)}
        bm25 = []
        with (
            tempfile.TemporaryDirectory() as tmp,
            MemoryService(Settings(data_dir=Path(tmp)), embedder=model) as service,
        ):
            for start in range(0, len(memories), 128):
                service.capture_batch(memories[start : start + 128])
            service.optimize()
            filters = SearchFilters(owner=sample.sample_id, include_shared=False)
            for question in questions:
                scores = np.zeros(len(ids))
                for scored in service.store.text_search(question.question, filters, 200):
                    scores[position[str(scored.memory.metadata["dia_id"])]] = scored.score
                bm25.append(scores)
        conversations.append(
            {
                "ids": np.array(ids),
                "previous": np.array(previous),
                "following": np.array(following),
                "cosine": {
                    f"{name}|{query}": q @ v.T
                    for name, v in vectors.items()
                    for query, q in query_vectors.items()
                },
                "bm25": bm25,
                "questions": questions,
            }
        )
    return conversations


def _part(scores: np.ndarray, top: np.ndarray, normalisation: str, cosine: bool) -> np.ndarray:
    part = np.zeros_like(scores)
    if not len(top):
        return part
    values = scores[top]
    if normalisation == "min-max":
        low, high = values.min(), values.max()
        part[top] = (values - low) / (high - low) if high > low else 1.0
    elif cosine:
        part[top] = np.clip(values, 0.0, 1.0)
    else:
        part[top] = values / values.max()
    return part


def rank(conversation: dict[str, Any], index: int, setting: dict[str, Any]) -> list[str]:
    """The top 25 turn ids of one question under ``setting``."""
    cosine = conversation["cosine"][f"{setting['embedding']}|{setting['query']}"][index]
    bm25 = conversation["bm25"][index]
    pool = setting["pool"]
    vector_top = np.argsort(-cosine)[:pool]
    text_top = np.argsort(-bm25)[:pool]
    text_top = text_top[bm25[text_top] > 0]
    candidates = np.union1d(vector_top, text_top)
    w = setting["vector_weight"]
    fused = w * _part(cosine, vector_top, setting["normalisation"], True) + (1 - w) * _part(
        bm25, text_top, setting["normalisation"], False
    )
    score = np.full_like(cosine, -1.0)
    score[candidates] = fused[candidates]
    weight = setting["neighbour_weight"]
    if weight:
        base = np.maximum(score, 0.0)
        before = np.where(conversation["previous"] >= 0, base[conversation["previous"]], 0.0)
        after = np.where(conversation["following"] >= 0, base[conversation["following"]], 0.0)
        smoothed = score.copy()
        smoothed[candidates] = (score + weight * np.maximum(before, after))[candidates] / (
            1 + weight
        )
        score = smoothed
    return list(conversation["ids"][np.argsort(-score, kind="stable")[:25]])


def evaluate(conversations: list[dict[str, Any]], setting: dict[str, Any]) -> dict[str, float]:
    """recall@10 on the inner (odd) and outer (even) halves and on all questions."""
    halves: dict[str, list[float]] = {"inner": [], "outer": []}
    number = 0
    for conversation in conversations:
        for index, question in enumerate(conversation["questions"]):
            value = recall_at(rank(conversation, index, setting), question.evidence, 10)
            # Numbered from 1: the 1st, 3rd, ... question form the inner half.
            halves["outer" if number % 2 else "inner"].append(value)
            number += 1
    every = halves["inner"] + halves["outer"]
    return {
        "inner_recall@10": round(float(np.mean(halves["inner"])), 4),
        "outer_recall@10": round(float(np.mean(halves["outer"])), 4),
        "recall@10": round(float(np.mean(every)), 4),
    }


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, nargs="?", default=DEFAULT_DATA)
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--grid", type=json.loads, default=None, help="JSON {name: [values]} replacing GRID"
    )
    args = parser.parse_args()
    grid = {**GRID, **(args.grid or {})}
    conversations = collect(args.path, grid["embedding"], grid["query"])
    rows = []
    for values in itertools.product(*grid.values()):
        setting = dict(zip(grid, values, strict=True))
        rows.append({**setting, **evaluate(conversations, setting)})
    rows.sort(key=lambda r: -r["inner_recall@10"])
    for row in rows[:20]:
        print(json.dumps(row))
    if args.out:
        args.out.write_text(json.dumps({"dataset": str(args.path), "settings": rows}, indent=1))


if __name__ == "__main__":
    main()
