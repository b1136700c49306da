"""Shared fixtures: the real embedding model (loaded once) and real stores in tmp dirs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tribal_memory.config import Settings
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.service import MemoryService


@pytest.fixture(scope="session")
def embedder() -> FastEmbedEmbedder:
    """The packaged all-MiniLM-L6-v2, loaded once per test session."""
    return FastEmbedEmbedder()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings over a fresh data dir."""
    return Settings(data_dir=tmp_path / "data")


@pytest.fixture
def service(settings: Settings, embedder: FastEmbedEmbedder) -> Iterator[MemoryService]:
    """A service over real LanceDB and SQLite in a temp dir, sharing the session's model."""
    with MemoryService(settings, embedder=embedder) as svc:
        yield svc
