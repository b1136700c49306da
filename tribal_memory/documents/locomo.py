"""LoCoMo-format conversations as memories.

LoCoMo (Maharana et al., "Evaluating Very Long-Term Conversational Memory of
LLM Agents", ACL 2024) is a JSON list of samples ``{sample_id, conversation,
qa, ...}``; ``conversation`` holds ``session_N`` turn lists and
``session_N_date_time`` strings. Every dialog turn becomes one memory: owner =
``sample_id``, content = ``"[<session date>] <speaker>: <text>"`` (plus the
image caption when a turn shares a picture), ``dia_id`` and session in
metadata, ``event_time`` = the session date, ``doc_id`` = the session
(``<sample_id>/session_<n>``) and ``chunk_index`` = the turn's position in it,
so that hybrid search sees which turns are adjacent (neighbour smoothing, see
:mod:`tribal_memory.retrieval`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tribal_memory.base.errors import InvalidInput
from tribal_memory.base.models import MemoryInput

_SESSION_KEY = re.compile(r"^session_(\d+)$")
_DIA_ID = re.compile(r"D\d+:\d+")


@dataclass(frozen=True, slots=True)
class LocomoQuestion:
    """One QA item: ``evidence`` is the normalised list of dia_ids ("D<session>:<turn>")."""

    question: str
    answer: str
    evidence: tuple[str, ...]
    category: int


@dataclass(frozen=True, slots=True)
class LocomoSample:
    """One conversation: its turns as memories and its questions."""

    sample_id: str
    memories: tuple[MemoryInput, ...]
    questions: tuple[LocomoQuestion, ...]


def parse_session_date(text: str) -> datetime | None:
    """Parse LoCoMo's ``"1:56 pm on 8 May, 2023"``; None when it does not parse."""
    for fmt in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y"):
        try:
            return datetime.strptime(text.strip(), fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


def normalise_evidence(raw: Any) -> tuple[str, ...]:
    """Evidence ids as a flat tuple: ``["D8:6; D9:17"]`` -> ``("D8:6", "D9:17")``."""
    items = raw if isinstance(raw, list) else [raw]
    found: list[str] = []
    for item in items:
        for match in _DIA_ID.findall(str(item)):
            if match not in found:
                found.append(match)
    return tuple(found)


def _turn_content(date: str, turn: dict[str, Any]) -> str:
    text = f"[{date}] {turn['speaker']}: {turn.get('text', '')}".strip()
    caption = turn.get("blip_caption")
    if caption:
        text += f" [shares a photo: {caption}]"
    return text


def _sample(raw: dict[str, Any]) -> LocomoSample:
    sample_id = str(raw["sample_id"])
    conversation = raw["conversation"]
    sessions = sorted(
        (int(m.group(1)), key) for key in conversation if (m := _SESSION_KEY.match(key))
    )
    memories: list[MemoryInput] = []
    for number, key in sessions:
        date = str(conversation.get(f"{key}_date_time", ""))
        when = parse_session_date(date)
        for position, turn in enumerate(conversation[key] or []):
            memories.append(
                MemoryInput(
                    content=_turn_content(date, turn),
                    owner=sample_id,
                    kind="fact",
                    source=f"locomo:{sample_id}",
                    doc_id=f"{sample_id}/{key}",
                    chunk_index=position,
                    event_time=when,
                    metadata={"dia_id": turn["dia_id"], "session": number},
                )
            )
    questions = tuple(
        LocomoQuestion(
            question=str(qa["question"]),
            answer=str(qa.get("answer", qa.get("adversarial_answer", ""))),
            evidence=normalise_evidence(qa.get("evidence", [])),
            category=int(qa["category"]),
        )
        for qa in raw.get("qa", [])
    )
    return LocomoSample(sample_id, tuple(memories), questions)


def load_locomo(path: Path) -> list[LocomoSample]:
    """Read a LoCoMo-format JSON file.

    Raises:
        InvalidInput: the file is missing, not JSON, or not in LoCoMo format.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"cannot read LoCoMo file {path}: {exc}") from exc
    if not isinstance(data, list):
        raise InvalidInput(f"{path} is not in LoCoMo format (expected a JSON list of samples)")
    try:
        return [_sample(item) for item in data]
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInput(f"{path} is not in LoCoMo format: {exc!r}") from exc


def iter_memories(samples: list[LocomoSample]) -> Iterator[MemoryInput]:
    """Every turn of every sample, in order."""
    for sample in samples:
        yield from sample.memories
