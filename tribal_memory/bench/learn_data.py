"""The learning benchmark's data: stores of memories with their questions split in two.

:func:`locomo_stores` makes one store per LoCoMo conversation,
:func:`suite_stores` one store of a project suite; :func:`reword` makes the
reworded questions; :func:`load` captures a store's memories.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tribal_memory.base.errors import InvalidInput
from tribal_memory.base.models import MemoryInput
from tribal_memory.service.memory_service import MemoryService

CATEGORIES = (1, 2, 3, 4)
_BATCH = 64
_WH = r"(?:what|when|where|who|whom|whose|which|why|how(?:\s+(?:many|much|long|often))?)"
_AUX = r"(?:is|are|was|were|do|does|did|has|have|had|can|could|will|would|should)"
_LEADING_WH = re.compile(rf"^\s*{_WH}\b(?:\s+{_AUX}\b)?\s*", re.IGNORECASE)
_TRAILING_CLAUSE = re.compile(
    r"^(?P<head>.+?)\s+(?P<tail>(?:in|on|at|for|with|about|after|before|during|from|to)\s+"
    r"[^,]+?)\s*\?*\s*$",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class BenchQuestion:
    """A question with the gold keys (``metadata["key"]`` of memories) that answer it.

    ``answer``: the expected answer's text, if known (LoCoMo's ``answer``): what
    the session protocol's reformulated search adds to the question.
    """

    text: str
    gold: tuple[str, ...]
    answer: str = ""


@dataclass(slots=True)
class BenchStore:
    """One store's memories (each with ``metadata["key"]``) and its question split."""

    owner: str
    memories: list[MemoryInput]
    fed: list[BenchQuestion]
    new: list[BenchQuestion]


def reword(question: str, index: int) -> str:
    """A rule-based rewording of ``question``; the rule is picked by ``index % 3``.

    0: drop the leading question word and auxiliary ("When did Ana move?" →
    "Ana move"); 1: move a trailing prepositional clause to the front
    ("What did Ana buy in Lisbon?" → "In Lisbon, what did Ana buy?"), falling
    back to rule 0; 2: "Do you remember <question>?".
    """
    text = question.strip().rstrip("?").strip()
    rule = index % 3
    if rule == 1:
        match = _TRAILING_CLAUSE.match(text)
        if match and len(match["head"].split()) >= 2:
            tail = match["tail"]
            return f"{tail[0].upper()}{tail[1:]}, {match['head'][0].lower()}{match['head'][1:]}?"
        rule = 0
    if rule == 0:
        dropped = _LEADING_WH.sub("", text)
        return dropped if dropped and dropped != text else f"About {text[0].lower()}{text[1:]}"
    return f"Do you remember {text[0].lower()}{text[1:]}?"


def locomo_stores(path: Path, seed: int, limit_samples: int | None = None) -> list[BenchStore]:
    """LoCoMo conversations as bench stores, questions split in half by ``seed``.

    Raises:
        InvalidInput: ``path`` is not a readable LoCoMo-format file.
    """
    from tribal_memory.documents.locomo import load_locomo

    stores = []
    for sample in load_locomo(path)[:limit_samples]:
        memories = [
            MemoryInput(
                m.content,
                owner=m.owner,
                kind=m.kind,
                source=m.source,
                doc_id=m.doc_id,
                chunk_index=m.chunk_index,
                event_time=m.event_time,
                metadata={**m.metadata, "key": str(m.metadata.get("dia_id"))},
            )
            for m in sample.memories
        ]
        questions = [
            BenchQuestion(q.question, tuple(q.evidence), q.answer)
            for q in sample.questions
            if q.category in CATEGORIES and q.evidence
        ]
        random.Random(f"{seed}:{sample.sample_id}").shuffle(questions)
        half = len(questions) // 2
        stores.append(BenchStore(sample.sample_id, memories, questions[:half], questions[half:]))
    return stores


def suite_stores(name: str, seed: int) -> list[BenchStore]:
    """A project suite as one bench store: half the facts fed on their first phrasing.

    Raises:
        NotFound: no suite of that name. InvalidInput: a malformed suite file.
    """
    from tribal_memory.bench.suite import load_suite

    suite = load_suite(name)
    owner = "team"
    memories = [
        MemoryInput(f.content, owner=owner, metadata={"key": f.fact_id, "kind": f.kind})
        for f in suite.facts
    ]
    memories += [
        MemoryInput(text, owner=owner, metadata={"key": f"distractor-{i}"})
        for i, text in enumerate(suite.distractors)
    ]
    facts = list(suite.facts)
    random.Random(seed).shuffle(facts)
    half = len(facts) // 2
    fed = [BenchQuestion(f.questions[0].text, (f.fact_id,)) for f in facts[:half]]
    new = [BenchQuestion(q.text, (f.fact_id,)) for f in facts[:half] for q in f.questions[1:]]
    new += [BenchQuestion(q.text, (f.fact_id,)) for f in facts[half:] for q in f.questions]
    return [BenchStore(owner, memories, fed, new)]


def load(service: MemoryService, memories: Sequence[MemoryInput]) -> None:
    """Capture ``memories`` in batches of ``_BATCH``, then optimise so every row is indexed."""
    for start in range(0, len(memories), _BATCH):
        service.capture_batch(list(memories[start : start + _BATCH]))
    service.optimize()


def learn_stores(
    path: Path | None, suite: str | None, seed: int, limit_samples: int | None = None
) -> tuple[list[BenchStore], str, str]:
    """The bench stores, dataset name and protocol of a project suite or a LoCoMo file.

    ``suite`` (protocol ``feedback-phrasing``, see :func:`suite_stores`) when
    given, else the LoCoMo file ``path`` (``feedback-half``, see :func:`locomo_stores`).

    Raises:
        InvalidInput: neither given, or as :func:`suite_stores` and :func:`locomo_stores`.
        NotFound: as :func:`suite_stores`.
    """
    if suite is not None:
        return suite_stores(suite, seed), suite, "feedback-phrasing"
    if path is None:
        raise InvalidInput("a LoCoMo-format path or a suite name is needed")
    return locomo_stores(path, seed, limit_samples), str(path), "feedback-half"
