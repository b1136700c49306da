"""The generated corpus of ``bench perf``: short facts, questions about them, cached embeddings.

Everything is derived from a seed with :class:`random.Random`, so the same
seed gives the same facts, owners and questions on every machine; nothing is
downloaded. Vocabulary is varied on purpose: besides common words, every
corpus draws a few thousand made-up project code names from syllables, so
BM25 sees a long tail of rare terms as in a real team's notes.

Owners are ``agent-00`` ... ``agent-19`` in turn, so each owner (in particular
:data:`FILTER_OWNER`) holds 5% of the memories, except that every hundredth
fact of ``agent-01`` goes to :data:`SMALL_OWNER` (1%).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tribal_memory.base.errors import StoreUnavailable
from tribal_memory.embeddings.base import Embedder, Vector

N_OWNERS = 20
"""Owners take turns, so each holds ``1 / N_OWNERS`` (5%) of the corpus."""
FILTER_OWNER = "agent-00"
"""The owner of the filtered searches (5% of the memories)."""
SMALL_OWNER = "agent-20"
"""The owner of the 1% filtered searches: facts ``i`` with ``i % 100 == 1``."""
CORPUS_VERSION = 2
"""Part of the embedding cache key: bump it when the generator or the cache changes."""
CACHE_CHUNK = 2048
"""Facts per embedding cache file (:func:`cached_embeddings`)."""


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_NAMES = _words(
    "Priya Ana Bruno Chen Dara Elif Femi Goran Hana Ivo Jonas Kemal Lena Mateo Nadia Omar "
    "Pavel Quinn Rosa Sanjay Tomas Uma Vera Wen Xavier Yara Zoltan Aiko Bilal Carmen Dmitri "
    "Esme Farid Greta Hugo Ines Jamal Kaito Leila Marek Nora Oskar Pilar Rahul Sofia Theo"
)
_CITIES = _words(
    "Lisbon Osaka Nairobi Denver Krakow Montreal Austin Seoul Porto Tallinn Lyon Bergen "
    "Recife Adelaide Ghent Bilbao Turin Leeds Hanoi Quito"
)
_DAYS = _words("Monday Tuesday Wednesday Thursday Friday Saturday Sunday")
_MONTHS = _words(
    "January February March April May June July August September October November December"
)
_LANGS = _words("Python Rust Go TypeScript Kotlin Elixir Haskell Java Ruby Scala Zig Swift")
_FOODS = _words("peanuts shellfish gluten lactose sesame eggs soy mustard celery kiwi")
_DBS = _words("Postgres SQLite MySQL ClickHouse Cassandra Redis DynamoDB CockroachDB")
_THINGS = _words(
    "editor keyboard coffee bean hiking trail board game podcast font terminal theme "
    "sci-fi novel climbing gym"
)
_COLORS = _words("teal amber crimson olive indigo ochre slate coral")
_SYLLABLES = _words(
    "ka lo mi ra ve to su ni pe da zu bo ri fa gle tor vin sha mek dro lu qua bre xi yo nor pal tek"
)

_TEMPLATES: tuple[tuple[str, str], ...] = (
    ("{name} moved the {svc} deploy to {day}.", "When is the {svc} deploy?"),
    ("{name} prefers {lang} for the {svc} tooling.", "Which language does {name} use for {svc}?"),
    ("The {svc} service listens on port {port}.", "What port does {svc} run on?"),
    ("{name} is allergic to {food}.", "What is {name} allergic to?"),
    ("{name} is on call for {svc} in {month}.", "Who is on call for {svc} in {month}?"),
    ("The {svc} data was migrated to {db} in {month}.", "Which database does {svc} use now?"),
    ("{name} lives in {city} and works from home on {day}.", "Where does {name} live?"),
    ("The {svc} budget for Q{quarter} is {amount} dollars.", "What is the {svc} budget?"),
    ("{name} reviewed pull request {num} in {svc}.", "Who reviewed pull request {num}?"),
    (
        "The {svc} sync with {name} and {name2} is on {day} at {hour}:00.",
        "When is the {svc} meeting with {name2}?",
    ),
    ("{name}'s favourite {thing} is the {color} one.", "What {thing} does {name} like?"),
    (
        "Incident {num} in {svc} was caused by an expired certificate.",
        "What caused incident {num}?",
    ),
    ("{name} mentors {name2} on {lang} every {day}.", "Who does {name} mentor?"),
    ("The {svc} staging cluster runs in {city}.", "Where is the {svc} staging cluster?"),
    ("{name} takes leave from {day} {month} {hour}.", "When is {name} on leave?"),
    ("The {svc} dashboard alert threshold is {port} ms.", "What is the {svc} alert threshold?"),
)


@dataclass(frozen=True, slots=True)
class Fact:
    """One generated memory: its text, owner and a question it answers."""

    content: str
    owner: str
    question: str


def _code_names(rng: random.Random, count: int) -> list[str]:
    names: set[str] = set()
    while len(names) < count:
        names.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))))
    return sorted(names)


def generate(n: int, seed: int, *, exclude: frozenset[str] = frozenset()) -> list[Fact]:
    """``n`` distinct short facts (about 40-70 characters), deterministic in ``seed``.

    Args:
        n: How many facts.
        seed: Seed of the generator; the same seed gives the same list.
        exclude: Contents that must not be generated (to draw facts disjoint
            from a corpus).

    Returns:
        ``n`` facts with distinct contents; fact ``i`` belongs to
        :data:`SMALL_OWNER` when ``i % 100 == 1``, else to ``agent-{i % 20:02d}``.
    """
    rng = random.Random(seed)
    services = _code_names(rng, max(200, min(5000, n // 20)))
    seen: set[str] = set(exclude)
    facts: list[Fact] = []
    while len(facts) < n:
        fact_text, question = rng.choice(_TEMPLATES)
        slots = {
            "name": rng.choice(_NAMES),
            "name2": rng.choice(_NAMES),
            "svc": rng.choice(services),
            "day": rng.choice(_DAYS),
            "month": rng.choice(_MONTHS),
            "lang": rng.choice(_LANGS),
            "food": rng.choice(_FOODS),
            "db": rng.choice(_DBS),
            "city": rng.choice(_CITIES),
            "thing": rng.choice(_THINGS),
            "color": rng.choice(_COLORS),
            "port": rng.randint(1000, 65000),
            "num": rng.randint(100, 999_999),
            "quarter": rng.randint(1, 4),
            "amount": rng.randint(1, 900) * 1000,
            "hour": rng.randint(8, 18),
        }
        content = fact_text.format(**slots)
        if content in seen:
            continue
        seen.add(content)
        i = len(facts)
        owner = SMALL_OWNER if i % 100 == 1 else f"agent-{i % N_OWNERS:02d}"
        facts.append(Fact(content, owner, question.format(**slots)))
    return facts


def questions(facts: Sequence[Fact], count: int, seed: int, owner: str | None = None) -> list[str]:
    """Up to ``count`` distinct questions about ``facts`` (of ``owner`` only, if given)."""
    pool = [f.question for f in facts if owner is None or f.owner == owner]
    unique = list(dict.fromkeys(pool))
    random.Random(seed).shuffle(unique)
    return unique[:count]


def cached_embeddings(
    facts: Sequence[Fact],
    embedder: Embedder,
    cache_dir: Path,
    *,
    progress: Callable[[int, int], None] | None = None,
    chunk: int = CACHE_CHUNK,
) -> tuple[Vector, bool]:
    """The embeddings of ``facts``' contents, from ``cache_dir`` when computed before.

    The cache holds one ``.npy`` file per ``chunk`` facts (counted from the
    first), keyed by the model id, the dimension and a hash of the chunk's
    contents, so a changed corpus or model never reads stale vectors, a
    corpus that begins like a cached one reads the chunks they share (the
    corpus of :func:`generate` is the same list up to its length from
    100,000 facts on, so 100k and 300k read the chunks of 1M), and a run
    stopped while embedding keeps the chunks it finished.

    Args:
        facts: The corpus.
        embedder: The model (the server's model).
        cache_dir: Directory of the cache files (created when missing).
        progress: Called with (done, total) after each chunk that is embedded.
        chunk: Facts per cache file and per call of ``embed_batch``.

    Returns:
        ``(vectors, from_cache)``: float32 of shape ``(len(facts), dim)``, rows
        L2-normalised; ``from_cache`` is True when nothing was embedded.

    Raises:
        StoreUnavailable: the cache directory cannot be written.
        EmbeddingError: the model failed.
    """
    vectors = np.zeros((len(facts), embedder.dim), np.float32)
    from_cache = True
    for start in range(0, len(facts), chunk):
        texts = [f.content for f in facts[start : start + chunk]]
        path = cache_dir / _chunk_file(embedder, texts)
        cached = np.load(path) if path.is_file() else None
        if cached is not None and cached.shape == (len(texts), embedder.dim):
            vectors[start : start + len(texts)] = cached
            continue
        from_cache = False
        embedded = embedder.embed_batch(texts)
        vectors[start : start + len(texts)] = embedded
        _save(path, embedded)
        if progress is not None:
            progress(start + len(texts), len(facts))
    return vectors, from_cache


def _chunk_file(embedder: Embedder, texts: Sequence[str]) -> str:
    digest = hashlib.sha256(f"{embedder.model_id}\x1f{embedder.dim}".encode())
    for text in texts:
        digest.update(text.encode())
        digest.update(b"\x1e")
    return f"perf-corpus-v{CORPUS_VERSION}-{len(texts)}-{digest.hexdigest()[:24]}.npy"


def _save(path: Path, vectors: Vector) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npy")
        np.save(tmp, vectors.astype(np.float32, copy=False))
        tmp.replace(path)
    except OSError as exc:
        raise StoreUnavailable(f"cannot write the embedding cache in {path.parent}: {exc}") from exc
