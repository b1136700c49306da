"""Consistency check, backup/restore while writing, kill -9 crashes and start-up failures."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from sqlalchemy import text

from tribal_memory.base.config import Settings
from tribal_memory.base.errors import InvalidInput
from tribal_memory.base.models import MemoryInput
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.ops.backup import create_backup, restore_backup
from tribal_memory.service.memory_service import MemoryService

ROOT = Path(__file__).resolve().parent.parent


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tribal_memory", *args],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _facts(n: int, prefix: str = "fact") -> list[MemoryInput]:
    return [MemoryInput(content=f"{prefix} {i}: the locker code is {i * 7919}") for i in range(n)]


# -- consistency --------------------------------------------------------------------


def test_feedback_after_a_delete_leaves_no_orphaned_weights(service: MemoryService) -> None:
    service.capture_batch([MemoryInput(content=f"the {w} is blue") for w in ("sky", "sea", "car")])
    result = service.recall_with_feedback("what is blue", k=3)
    hit_ids = [hit.memory.memory_id for hit in result.hits]
    service.delete(hit_ids[0])
    service.delete(hit_ids[1])
    assert result.retrieval_id is not None
    service.record_usage_feedback(result.retrieval_id, [hit_ids[0]])
    report = service.check_consistency()
    assert report.ok, report.as_dict()


def test_check_finds_and_repairs_orphaned_rows(service: MemoryService) -> None:
    a, b = (r.memory.memory_id for r in service.capture_batch(_facts(2)))
    service.relate(a, b, "supports")
    assert service.check_consistency().ok
    with service.db.session() as session:  # as a crash between two writes would leave it
        session.execute(
            text(
                "INSERT INTO fact_anchors (memory_id, owner, anchor_text, source, confidence, "
                "created_at, uses) VALUES ('gone', 'o', 'q', 'manual', 1, '2024-01-01', 0)"
            )
        )
        session.execute(
            text(
                "INSERT INTO relations (source_id, target_id, type, weight, created_at) "
                "VALUES (:a, 'gone', 'x', 1, '2024-01-01')"
            ),
            {"a": a},
        )
    report = service.check_consistency()
    assert not report.ok
    assert report.orphans == {"relations": ["gone"], "fact_anchors": ["gone"]}
    assert service.check_consistency(repair=True).ok
    assert [r.target_id for r in service.relations(a)] == [b]


# -- backup and restore ---------------------------------------------------------------


def test_backup_while_writing_then_restore(
    tmp_path: Path, settings: Settings, embedder: FastEmbedEmbedder
) -> None:
    with MemoryService(settings, embedder=embedder) as service:
        before = [r.memory.memory_id for r in service.capture_batch(_facts(40))]
        service.relate(before[0], before[1], "supports")
        stop = threading.Event()
        written: list[str] = []
        failures: list[BaseException] = []

        def writer() -> None:
            n = 0
            while not stop.is_set():
                try:
                    batch = service.capture_batch(_facts(4, prefix=f"later {n}"))
                except BaseException as exc:  # noqa: BLE001 - asserted below
                    failures.append(exc)
                    return
                written.extend(r.memory.memory_id for r in batch)
                n += 1

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            report = create_backup(settings, tmp_path / "backup")
        finally:
            stop.set()
            thread.join(timeout=60)
        assert failures == []
        assert written, "the writer must have run during the backup"

    assert report.memories >= len(before)
    manifest = json.loads((tmp_path / "backup" / "backup.json").read_text())
    assert manifest["memories"] == report.memories

    with pytest.raises(InvalidInput):
        restore_backup(tmp_path / "backup", settings.data_dir)  # not empty
    restored = tmp_path / "restored"
    restore_backup(tmp_path / "backup", restored)
    with MemoryService(Settings(data_dir=restored), embedder=embedder) as copy:
        assert set(before) <= set(copy.get_many(before))
        assert copy.stats().memories == report.memories
        assert copy.check_consistency().ok
        assert [r.target_id for r in copy.relations(before[0])] == [before[1]]
        hits = copy.search("what is the locker code of fact 3?", k=5).hits
        assert before[3] in {hit.memory.memory_id for hit in hits}


def test_backup_refuses_a_non_empty_destination(tmp_path: Path, service: MemoryService) -> None:
    service.capture_batch(_facts(2))
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "file").write_text("x")
    with pytest.raises(InvalidInput):
        create_backup(service.settings, tmp_path / "taken")
    with pytest.raises(InvalidInput):
        create_backup(service.settings, service.settings.data_dir / "inside")


@pytest.mark.slow
def test_backup_and_restore_commands(tmp_path: Path, service: MemoryService) -> None:
    service.capture_batch(_facts(5))
    backup = _cli(
        "--json", "backup", str(tmp_path / "b"), "--data-dir", str(service.settings.data_dir)
    )
    assert backup.returncode == 0, backup.stderr
    assert json.loads(backup.stdout)["memories"] == 5
    restored = _cli("--json", "restore", str(tmp_path / "b"), "--data-dir", str(tmp_path / "r"))
    assert restored.returncode == 0, restored.stderr
    check = _cli("--json", "check", "--data-dir", str(tmp_path / "r"))
    assert check.returncode == 0, check.stderr
    assert json.loads(check.stdout) == {
        "ok": True,
        "memories": 5,
        "duplicate_ids": [],
        "orphans": {},
        "misfiled": [],
    }
    again = _cli("restore", str(tmp_path / "b"), "--data-dir", str(tmp_path / "r"))
    assert again.returncode == 1
    assert again.stderr.startswith("error: data dir") and "Traceback" not in again.stderr


# -- kill -9 ------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("maintenance", [False, True], ids=["load", "during-maintenance"])
def test_acknowledged_writes_survive_kill_9(
    embedder: FastEmbedEmbedder, tmp_path: Path, maintenance: bool
) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import crash  # benchmarks/crash.py
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    report = crash.run(
        3,
        clients=2,
        search_sample=10,
        data_dir=tmp_path / "data",
        embedder=embedder,
        maintenance=maintenance,
    )
    assert report.kills == 3
    if maintenance:  # maintenance runs back to back: a kill interrupted at least one run
        assert report.kills_during_maintenance >= 1, report
    assert report.acknowledged_writes > 0
    assert report.lost_acknowledged_writes == 0, report.problems
    assert report.not_found_by_search == 0, report.problems
    assert report.restarts_needing_repair == 0, report.problems


# -- start-up failures ------------------------------------------------------------------


def _assert_clean_failure(result: subprocess.CompletedProcess[str], words: str) -> None:
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert words in lines[0], lines[0]
    assert "Traceback" not in result.stderr + result.stdout


def _tree(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


@pytest.fixture
def populated(tmp_path: Path, settings: Settings, embedder: FastEmbedEmbedder) -> Path:
    """A data dir with a few memories, closed."""
    with MemoryService(settings, embedder=embedder) as service:
        service.capture_batch(_facts(3))
    return settings.data_dir


@pytest.mark.slow
@pytest.mark.sqlite_only(reason="corrupts the SQLite file")
def test_corrupted_sqlite_file_is_a_clear_error(populated: Path) -> None:
    sqlite = populated / "tribal.sqlite3"
    for side in ("-wal", "-shm"):
        Path(f"{sqlite}{side}").unlink(missing_ok=True)
    sqlite.write_bytes(b"this is not a database" * 100)
    before = _tree(populated)
    result = _cli("capture", "a new fact", "--data-dir", str(populated))
    _assert_clean_failure(result, "database")
    assert _tree(populated) == before


@pytest.mark.slow
def test_corrupted_lancedb_dir_is_a_clear_error(populated: Path) -> None:
    versions = populated / "lancedb" / "memories.lance" / "_versions"
    for manifest in versions.iterdir():
        manifest.write_bytes(b"garbage")
    before = _tree(populated)
    result = _cli("capture", "a new fact", "--data-dir", str(populated))
    _assert_clean_failure(result, "memory store")
    assert _tree(populated) == before


@pytest.mark.slow
def test_read_only_data_dir_is_a_clear_error(populated: Path) -> None:
    """A read-only bind mount (private mount namespace) or, failing that, file modes."""
    before = _tree(populated)
    capture = f"{sys.executable} -m tribal_memory capture 'a new fact' --data-dir {populated}"
    if _mount_namespace_available():
        remount = f"mount --bind {populated} {populated} && mount -o remount,ro,bind {populated}"
        result = subprocess.run(
            ["unshare", "-rm", "sh", "-c", f"{remount} && {capture}"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    elif os.geteuid() != 0:
        populated.chmod(0o555)
        try:
            result = _cli("capture", "a new fact", "--data-dir", str(populated))
        finally:
            populated.chmod(0o755)
    else:
        pytest.skip("root ignores file modes and no mount namespace is available")
    _assert_clean_failure(result, "not writable")
    assert _tree(populated) == before


def _mount_namespace_available() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=1m none /mnt"],
        capture_output=True,
        timeout=30,
        check=False,
    )
    return probe.returncode == 0


@pytest.mark.slow
def test_full_disk_is_a_clear_error(tmp_path: Path) -> None:
    """A 2 MB tmpfs (in a private mount namespace, no root needed) fills up mid-capture."""
    if not _mount_namespace_available():
        pytest.skip("cannot mount a tmpfs in a user namespace here (unshare -rm)")
    mount = tmp_path / "small"
    mount.mkdir()
    big = "x" * 15_000
    script = (
        f"mount -t tmpfs -o size=2m none {mount} && "
        f"{sys.executable} -m tribal_memory --json capture 'first fact' --data-dir {mount}/data && "
        # fill the disk but for a few KB, then try to write more than fits
        f"(dd if=/dev/zero of={mount}/filler bs=4k 2>/dev/null; true) && "
        f"{sys.executable} -c \"import os; os.truncate('{mount}/filler', "
        f"os.path.getsize('{mount}/filler') - 8192)\" && "
        f"{sys.executable} -m tribal_memory --json capture '{big}' --data-dir {mount}/data; "
        "echo exit=$?; "
        # space again: the store opens, holds only the first fact and is consistent
        f"rm {mount}/filler && "
        f"{sys.executable} -m tribal_memory --json check --data-dir {mount}/data"
    )
    result = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env=os.environ,
    )
    assert "exit=1" in result.stdout, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    assert "Traceback" not in result.stderr
    check = json.loads(result.stdout.strip().splitlines()[-1])
    assert check == {
        "ok": True,
        "memories": 1,
        "duplicate_ids": [],
        "orphans": {},
        "misfiled": [],
    }
