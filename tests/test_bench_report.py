"""The report helpers every benchmark script shares: header, commit, copied data dir."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tribal_memory.bench.report import checkout_commit, copied_data_dir, report_header


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A git checkout with one commit holding ``scripts/run.py``."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    (repo / "scripts" / "run.py").write_text("print('hi')\n")
    for args in (
        ["init", "-q"],
        ["add", "."],
        ["-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-q", "-m", "one"],
    ):
        subprocess.run(["git", "-C", str(repo), *args], check=True)
    return repo


def test_a_script_file_names_the_commit_of_its_checkout(checkout: Path) -> None:
    head = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert checkout_commit(checkout / "scripts" / "run.py") == head
    assert checkout_commit(checkout / "scripts") == head
    header = report_header("demo", checkout / "scripts" / "run.py")
    assert header["benchmark"] == "demo"
    assert header["commit"] == head
    assert len(header["load_avg_1_5_15_at_start"]) == 3


def test_outside_a_checkout_the_commit_is_none(tmp_path: Path) -> None:
    (tmp_path / "alone.py").write_text("")
    assert checkout_commit(tmp_path / "alone.py") is None
    assert "commit" not in report_header("demo")


def test_a_copied_data_dir_leaves_the_kept_one_alone_and_goes_away(tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    (kept / "memories.lance").mkdir(parents=True)
    (kept / "memories.lance" / "a").write_bytes(b"rows")
    with copied_data_dir(kept) as copy:
        assert (copy / "memories.lance" / "a").read_bytes() == b"rows"
        (copy / "memories.lance" / "a").write_bytes(b"changed")
    assert not copy.exists()
    assert (kept / "memories.lance" / "a").read_bytes() == b"rows"
