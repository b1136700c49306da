"""The README documents every setting; the public API is pinned."""

from __future__ import annotations

from pathlib import Path

import tribal_memory
from tribal_memory.base.config import Settings

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def test_every_setting_is_in_the_readme_table() -> None:
    missing = [n for n in Settings.model_fields if f"`TRIBAL_{n.upper()}`" not in README]
    assert missing == []


def test_every_setting_has_a_description() -> None:
    assert [n for n, f in Settings.model_fields.items() if not f.description] == []


def test_public_api_is_pinned() -> None:
    assert sorted(tribal_memory.__all__) == sorted(
        [
            "SHARED_OWNER",
            "CaptureResult",
            "CommonNeighbor",
            "Conflict",
            "EmbeddingError",
            "EmbeddingModelMismatch",
            "Hit",
            "InvalidInput",
            "Memory",
            "MemoryInput",
            "MemoryPage",
            "MemoryPatch",
            "MemoryService",
            "Near",
            "Neighbor",
            "NotFound",
            "OwnerCleared",
            "Relation",
            "RelationInput",
            "SearchFilters",
            "SearchResult",
            "Settings",
            "StoreStats",
            "StoreUnavailable",
            "TooLarge",
            "Traversal",
            "TribalError",
            "__version__",
        ]
    )
    for name in tribal_memory.__all__:
        assert hasattr(tribal_memory, name)


def test_settings_read_the_environment_when_built(monkeypatch: object, tmp_path: Path) -> None:
    import pytest

    assert isinstance(monkeypatch, pytest.MonkeyPatch)
    monkeypatch.setenv("TRIBAL_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("TRIBAL_VECTOR_WEIGHT", "0.3")
    settings = Settings()
    assert settings.data_dir == tmp_path and settings.vector_weight == 0.3


def test_the_readme_table_gives_each_settings_default() -> None:
    """A changed default must be changed in the README too (plain values only)."""
    wrong = []
    for name, field in Settings.model_fields.items():
        default = field.default
        if isinstance(default, bool | int | float | str) and default != "":  # "": derived
            row = f"| `TRIBAL_{name.upper()}` | `{default}` |"
            if row not in README:
                wrong.append((name, default))
    assert wrong == []
