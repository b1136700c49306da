"""The docs' configuration table holds every setting; the public API is pinned."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import tribal_memory
from tribal_memory.base.config import ClientSettings, Settings

ROOT = Path(__file__).resolve().parent.parent
CONFIG_PAGE = ROOT / "docs" / "reference" / "configuration.md"


def _hooks() -> ModuleType:
    """docs/hooks.py, which generates the configuration table when the site is built."""
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _config_page() -> str:
    """The configuration page as the site shows it (placeholders filled)."""
    page = CONFIG_PAGE.read_text(encoding="utf-8")
    assert "{{ settings_table }}" in page
    filled: str = _hooks().on_page_markdown(page)
    return filled


def test_every_setting_is_in_the_docs_table() -> None:
    page = _config_page()
    fields = [*Settings.model_fields, *ClientSettings.model_fields]
    missing = [n for n in fields if f"| `TRIBAL_{n.upper()}` |" not in page]
    assert missing == []


def test_every_setting_has_a_description() -> None:
    for model in (Settings, ClientSettings):
        assert [n for n, f in model.model_fields.items() if not f.description] == []


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


def test_the_docs_table_gives_each_settings_default() -> None:
    """The generated table shows each plain default as it is (unset ones as "unset")."""
    page = _config_page()
    wrong = []
    for model in (Settings, ClientSettings):
        for name, field in model.model_fields.items():
            default = field.default
            if isinstance(default, bool | int | float | str) and default != "":  # "": derived
                row = f"| `TRIBAL_{name.upper()}` | `{default}` |"
            elif default is None or default in ("", ()):
                row = f"| `TRIBAL_{name.upper()}` | unset |"
            else:
                continue
            if row not in page:
                wrong.append((name, default))
    assert wrong == []
