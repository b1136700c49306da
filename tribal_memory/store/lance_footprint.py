"""Where the memory table's bytes on disk go: data, each kind of index, old versions.

A local Lance table directory holds ``data/`` (fragment files), ``_indices/<uuid>/``
(one directory per index segment and version), ``_deletions/``,
``_versions/`` (one manifest per version) and ``_transactions/``. The
newest manifest names the files the newest version reads: its data files by
name and its index segments by UUID (16 raw bytes). Everything it does not
name is kept only for older versions (see :mod:`.lance_versions`).

Index directories are told apart by their files, as Lance writes them:
``index.idx``/``auxiliary.idx`` (IVF vector index), ``*invert.lance``/
``*tokens.lance`` (full-text), ``page_lookup.lance`` (BTREE) and
``bitmap_page_lookup.lance`` (BITMAP).
"""

from __future__ import annotations

import os
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

FLOAT32_BYTES = 4


@dataclass(frozen=True, slots=True)
class TableFootprint:
    """Bytes on disk of one Lance table directory, by what they hold.

    Attributes:
        vectors: The newest version's vector column (rows x dim x 4 bytes).
        text: The rest of its data files: content and the other columns.
        fts: Its full-text (BM25) index.
        ivf: Its IVF vector index (IVF_FLAT keeps a copy of every vector).
        scalar_indexes: Its BTREE and BITMAP indexes.
        versions: Files only older versions read (data, indexes, manifests,
            transaction records).
        other: The newest manifest and transaction record, the version
            hint, deletion files (of any version) and tags.
    """

    vectors: int
    text: int
    fts: int
    ivf: int
    scalar_indexes: int
    versions: int
    other: int

    @property
    def total(self) -> int:
        """Every byte of the table directory."""
        return sum(asdict(self).values())

    def as_dict(self) -> dict[str, int]:
        """``{"vectors", "text", "fts", "ivf", "scalar_indexes", "versions", "other"}`` in bytes."""
        return asdict(self)


def dir_bytes(path: Path) -> int:
    """Bytes of every file under ``path`` (0 when missing; files removed meanwhile are skipped)."""
    total = 0
    for root, _dirs, files in os.walk(path):  # os.walk skips directories that vanish
        for name in files:
            total += _size(Path(root) / name)
    return total


def _size(path: Path) -> int:
    """Bytes of one file; 0 when a cleanup removed it meanwhile."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def index_kind(segment: Path) -> str:
    """``"ivf"``, ``"fts"``, ``"scalar_indexes"`` or ``"other"`` for one ``_indices/<uuid>`` dir."""
    names = {name for _root, _dirs, files in os.walk(segment) for name in files}
    if names & {"index.idx", "auxiliary.idx"}:
        return "ivf"
    if any(n.endswith(("invert.lance", "tokens.lance", "docs.lance")) for n in names):
        return "fts"
    if names & {"page_lookup.lance", "page_data.lance", "bitmap_page_lookup.lance"}:
        return "scalar_indexes"
    return "other"


def newest_manifest(table_dir: Path) -> Path | None:
    """The manifest of the newest version, or None when the table has none.

    Lance names manifests either ``<version>.manifest`` or, in its V2 naming,
    ``<2^64 - 1 - version>.manifest`` (zero-padded to 20 digits).
    """
    manifests = list((table_dir / "_versions").glob("*.manifest"))
    if not manifests:
        return None
    inverted = any(len(p.stem) == 20 for p in manifests)
    pick = min if inverted else max
    return pick(manifests, key=lambda p: int(p.stem))


def table_footprint(table_dir: Path, rows: int, dim: int) -> TableFootprint:
    """What the bytes of the Lance table at ``table_dir`` hold (see :class:`TableFootprint`).

    Args:
        table_dir: The table's directory (``<lancedb dir>/memories.lance``).
        rows: Rows in the newest version.
        dim: Vector dimension.

    Returns:
        The breakdown; every byte counts in exactly one field. A table with
        no manifest yet counts everything under ``versions``.
    """
    manifest_path = newest_manifest(table_dir)
    manifest = manifest_path.read_bytes() if manifest_path is not None else b""
    parts = dict.fromkeys(("data", "fts", "ivf", "scalar_indexes", "versions", "other"), 0)
    data_dir = table_dir / "data"
    for item in data_dir.iterdir() if data_dir.is_dir() else ():
        parts["data" if item.name.encode() in manifest else "versions"] += _size(item)
    indices = table_dir / "_indices"
    for segment in indices.iterdir() if indices.is_dir() else ():
        size = dir_bytes(segment)
        live = _is_uuid(segment.name) and uuid.UUID(segment.name).bytes in manifest
        parts[index_kind(segment) if live else "versions"] += size
    for item in (table_dir / "_versions").glob("*"):
        old = item.suffix == ".manifest" and item != manifest_path
        parts["versions" if old else "other"] += _size(item)
    transactions = table_dir / "_transactions"
    for item in transactions.iterdir() if transactions.is_dir() else ():
        parts["other" if item.name.encode() in manifest else "versions"] += _size(item)
    known = {"data", "_indices", "_versions", "_transactions"}
    for item in table_dir.iterdir():
        if item.name not in known:
            parts["other"] += dir_bytes(item) if item.is_dir() else _size(item)
    vectors = min(parts["data"], rows * dim * FLOAT32_BYTES)
    return TableFootprint(
        vectors=vectors,
        text=parts["data"] - vectors,
        fts=parts["fts"],
        ivf=parts["ivf"],
        scalar_indexes=parts["scalar_indexes"],
        versions=parts["versions"],
        other=parts["other"],
    )


def data_file_formats(table_dir: Path) -> set[str]:
    """Lance file formats (``"2.1"``, ``"2.2"``, ...) of the data files under ``table_dir``.

    Read from each file's footer, whose last 8 bytes are the format's major
    and minor version (little-endian u16 each) and the magic ``LANC``. Empty
    when the table has no data file; files of older versions count too.

    Raises:
        ValueError: a data file does not end in a Lance footer.
    """
    formats = set()
    for path in (table_dir / "data").glob("*.lance"):
        with path.open("rb") as f:
            f.seek(-8, os.SEEK_END)
            footer = f.read(8)
        if footer[4:] != b"LANC":
            raise ValueError(f"{path} does not end in a Lance footer")
        major, minor = int.from_bytes(footer[:2], "little"), int.from_bytes(footer[2:4], "little")
        formats.add(f"{major}.{minor}")
    return formats


def _is_uuid(name: str) -> bool:
    try:
        uuid.UUID(name)
    except ValueError:
        return False
    return True
