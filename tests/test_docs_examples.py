"""The code examples of the docs run as written (docs/examples/*.py, included by the pages)."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "docs" / "examples"


def test_the_first_memory_example_runs_and_is_the_readmes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    example = EXAMPLES / "first_memory.py"
    assert example.read_text(encoding="utf-8") in (ROOT / "README.md").read_text(encoding="utf-8")
    getting_started = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    assert f'--8<-- "docs/examples/{example.name}"' in getting_started
    monkeypatch.chdir(tmp_path)  # the example opens ./data
    runpy.run_path(str(example), run_name="__main__")
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("1 ")
    assert printed[0].endswith("Alice prefers green tea over coffee")
    assert (tmp_path / "data").is_dir()
