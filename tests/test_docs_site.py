"""The docs site builds strictly, holds every reference, and cites only result files that exist.

The strict build needs the ``docs`` extra (``pip install -e '.[docs]'``; ``make install``
and ``.ci/run`` install it); without MkDocs that test is skipped and says so.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
RESULTS = ROOT / "benchmarks" / "results"
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _doc_texts() -> dict[Path, str]:
    return {p: p.read_text(encoding="utf-8") for p in sorted(DOCS.rglob("*.md"))}


@pytest.mark.slow
def test_the_site_builds_strictly_and_loads_nothing_from_elsewhere(tmp_path: Path) -> None:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        pytest.skip("MkDocs / mkdocs-material not installed: pip install -e '.[docs]'")
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    # The references are generated from the code: every command, route and setting is there.
    cli = (site / "reference" / "cli.html").read_text(encoding="utf-8")
    for command in ("serve", "search", "feedback", "ingest", "backup", "openclaw setup"):
        assert f"tribal-memory {command}" in cli
    http = (site / "reference" / "http.html").read_text(encoding="utf-8")
    for route in ("POST /v1/search", "POST /v1/feedback", "GET /v1/stats/retrieval", "GET /health"):
        assert route in http
    assert (site / "reference" / "openapi.json").is_file()
    python = (site / "reference" / "python.html").read_text(encoding="utf-8")
    for name in ("MemoryService.recall_with_feedback", "client.TribalMemoryClient.search"):
        assert f'id="tribal_memory.{name}"' in python
    # No page pulls a script, style or font from another host (no CDN, no web fonts).
    external = re.compile(r"<(?:script|link|img)\b[^>]*(?:src|href)=\"(?:https?:)?//", re.I)
    offenders = [
        str(page.relative_to(site))
        for page in site.rglob("*.html")
        if external.search(page.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_the_python_reference_covers_the_public_api() -> None:
    import tribal_memory

    page = (DOCS / "reference" / "python.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^::: tribal_memory\.(\w+)$", page, re.M))
    described_elsewhere = {"__version__", "SHARED_OWNER", "Settings"}
    assert set(tribal_memory.__all__) - described_elsewhere - documented == set()


def test_the_reference_pages_use_the_generated_tables() -> None:
    assert "{{ settings_table }}" in (DOCS / "reference" / "configuration.md").read_text()
    assert "{{ cli_reference }}" in (DOCS / "reference" / "cli.md").read_text()
    assert "{{ http_reference }}" in (DOCS / "reference" / "http.md").read_text()


def test_every_cited_result_file_exists_and_every_result_file_is_cited() -> None:
    cited: set[str] = set()
    for text in [README, *_doc_texts().values()]:
        cited |= set(re.findall(r"benchmarks/results/([\w.*-]+\.(?:json|txt))", text))
        # Tables and prose also name files of benchmarks/results/ by their bare name.
        cited |= {name for name in re.findall(r"`([\w.*-]+\.(?:json|txt))`", text)}
    present = {p.name for p in RESULTS.iterdir() if p.suffix in (".json", ".txt")}
    missing = sorted(
        name
        for name in cited
        if "*" not in name and name not in present and name.startswith(_RESULT_PREFIXES)
    )
    assert missing == []
    # Files named with a `*` (perf-variant-rows-*.json) count as cited by their pattern.
    patterns = [re.escape(n).replace(r"\*", ".*") for n in cited if "*" in n]
    uncited = sorted(
        name
        for name in present - cited
        if not any(re.fullmatch(p, name) for p in patterns) and name not in _referenced_by_code()
    )
    assert uncited == []


_RESULT_PREFIXES = (
    "calibration-", "cold-sweep", "crash", "documents-", "fact-sweep", "fusion-sweep",
    "graph-sweep", "learn-", "locomo-dev", "perf", "prior-sim", "tune-learned",
)  # fmt: skip


def _referenced_by_code() -> set[str]:
    names: set[str] = set()
    for folder in ("tribal_memory", "benchmarks", "tests", "scripts"):
        for path in (ROOT / folder).rglob("*.py"):
            names |= set(re.findall(r"results/([\w.-]+\.(?:json|txt))", path.read_text()))
    names |= set(re.findall(r"results/([\w.-]+\.(?:json|txt))", (ROOT / "Makefile").read_text()))
    return names


def test_the_readme_is_short_and_its_links_resolve() -> None:
    assert len(README.splitlines()) <= 200
    # The two quick-start commands, exactly.
    assert "make run    # install into .venv, start the server" in README
    assert "make test   # install into .venv (with test tools) and run the test suite" in README
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if not link.startswith(("http://", "https://"))]
    assert local and [link for link in local if not (ROOT / link).exists()] == []
