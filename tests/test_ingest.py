"""Document loading and chunking (tribal_memory.documents.parsing); no embedding model needed.

Token counts come from the packaged tokenizer (tribal_memory.documents.tokens).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tribal_memory.base.errors import InvalidInput
from tribal_memory.documents import doc_id_for, iter_paths, load_document, load_paths
from tribal_memory.documents.chunking import chunk_lines
from tribal_memory.documents.tokens import count_tokens

GUIDE = """\
Preamble before any heading.

# Guide

## Install

Run pip install tribal-memory.
Then run tribal-memory migrate.

```bash
# a comment, not a heading
tribal-memory serve
```

## Usage

### Search

Use hybrid search for names and dates.

## Empty
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def lines_of(path: Path, start: int, end: int) -> str:
    return "\n".join(path.read_text(encoding="utf-8").splitlines()[start - 1 : end])


def chunk_tokens(text: str) -> int:
    return count_tokens(text)


def test_markdown_sections_follow_headings(tmp_path: Path) -> None:
    path = write(tmp_path / "docs" / "guide.md", GUIDE)

    chunks = load_document(path, owner="team", root=tmp_path)

    assert [c.metadata["heading"] for c in chunks] == [
        "",
        "Guide > Install",
        "Guide > Usage > Search",
    ]
    assert [c.metadata["start_line"] for c in chunks] == [1, 5, 17]
    assert [c.metadata["end_line"] for c in chunks] == [1, 13, 19]
    # Headings inside fenced code are text; a section holding only its heading is no chunk.
    assert "# a comment, not a heading" in chunks[1].content
    assert not any("Empty" in c.content for c in chunks)
    for chunk in chunks:
        start, end = chunk.metadata["start_line"], chunk.metadata["end_line"]
        assert chunk.content == lines_of(path, start, end)


def test_chunk_fields_and_deterministic_ids(tmp_path: Path) -> None:
    path = write(tmp_path / "docs" / "guide.md", GUIDE)

    chunks = load_document(path, owner="team", root=tmp_path)

    doc_id = doc_id_for("docs/guide.md")
    assert [c.chunk_index for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert chunk.kind == "chunk"
        assert chunk.owner == "team"
        assert chunk.source == "docs/guide.md"
        assert chunk.doc_id == doc_id
        assert chunk.tags == ()
        assert chunk.metadata["fragment_id"] == f"{doc_id}-chunk-{chunk.chunk_index}"
    # Same relative path (another checkout): same ids. Another path: another document.
    copy = write(tmp_path / "elsewhere" / "docs" / "guide.md", GUIDE)
    assert load_document(copy, owner="team", root=tmp_path / "elsewhere") == chunks
    assert load_document(path, owner="team", root=tmp_path / "docs")[0].doc_id != doc_id


def test_without_root_the_source_is_the_absolute_path(tmp_path: Path) -> None:
    path = write(tmp_path / "note.txt", "just a note")

    for root in (None, tmp_path / "unrelated"):
        (chunk,) = load_document(path, owner="me", root=root)
        assert chunk.source == path.absolute().as_posix()
        assert chunk.doc_id == doc_id_for(path.absolute().as_posix())


def test_text_files_are_one_section(tmp_path: Path) -> None:
    path = write(tmp_path / "notes.txt", "# not a heading in a .txt\n\nsecond paragraph\n")

    (chunk,) = load_document(path, owner="me", root=tmp_path)

    assert chunk.metadata["heading"] == ""
    assert (chunk.metadata["start_line"], chunk.metadata["end_line"]) == (1, 3)
    assert chunk.content == "# not a heading in a .txt\n\nsecond paragraph"


def test_long_sections_split_with_overlap(tmp_path: Path) -> None:
    lines = [" ".join(f"w{i}x{j}" for j in range(7)) for i in range(30)]
    path = write(tmp_path / "long.md", "# Long\n" + "\n".join(lines) + "\n")

    chunks = load_document(path, owner="me", root=tmp_path, max_tokens=40, overlap_tokens=6)

    assert len(chunks) > 3
    for chunk in chunks:
        assert chunk_tokens(chunk.content) <= 40
        assert chunk.metadata["heading"] == "Long"
    for before, after in zip(chunks, chunks[1:], strict=False):
        shared = set(before.content.split()) & set(after.content.split())
        assert 0 < chunk_tokens(" ".join(shared)) <= 6
        assert after.metadata["start_line"] <= before.metadata["end_line"]
    words = [w for c in chunks for w in c.content.split()]
    assert sorted(set(words)) == sorted(" ".join(lines).split() + ["#", "Long"])
    assert chunks[-1].metadata["end_line"] == 31


def test_zero_overlap_partitions_the_words(tmp_path: Path) -> None:
    text = "\n".join(" ".join(f"a{i}b{j}" for j in range(5)) for i in range(20))
    path = write(tmp_path / "plain.txt", text)

    chunks = load_document(path, owner="me", root=tmp_path, max_tokens=20, overlap_tokens=0)

    assert [w for c in chunks for w in c.content.split()] == text.split()


def test_a_long_line_is_split_inside_the_line(tmp_path: Path) -> None:
    path = write(tmp_path / "wide.md", "intro\n" + " ".join(f"t{i}" for i in range(100)))

    chunks = load_document(path, owner="me", root=tmp_path, max_tokens=30, overlap_tokens=4)

    assert len(chunks) >= 4
    assert all(c.metadata["end_line"] == 2 for c in chunks[1:])
    assert chunks[-1].content.endswith("t99")


def test_a_word_over_the_budget_is_cut_at_token_boundaries(tmp_path: Path) -> None:
    blob = "-".join(f"part{i}" for i in range(30))  # one word of about 90 tokens
    path = write(tmp_path / "blob.txt", f"before {blob} after")

    chunks = load_document(path, owner="me", root=tmp_path, max_tokens=20, overlap_tokens=0)

    assert len(chunks) >= 5
    assert all(c.metadata["tokens"] <= 20 for c in chunks)
    assert "".join("".join(c.content.split()) for c in chunks) == f"before{blob}after"


def test_empty_and_blank_files_give_no_chunks(tmp_path: Path) -> None:
    assert load_document(write(tmp_path / "a.md", ""), owner="me") == []
    assert load_document(write(tmp_path / "b.txt", "\n  \n"), owner="me") == []


@pytest.mark.parametrize(
    ("name", "content", "kwargs", "message"),
    [
        ("a.docx", b"PK", {}, "not a document"),
        ("a.pdf", b"%PDF-1.4 not really", {}, "not a readable PDF"),
        ("a.txt", b"\xff\xfe\xfa", {}, "not UTF-8"),
        ("a.txt", b"ok", {"max_tokens": 0}, "max_tokens"),
        ("a.txt", b"ok", {"max_tokens": 10, "overlap_tokens": 10}, "overlap_tokens"),
    ],
)
def test_bad_input_is_invalid(
    tmp_path: Path, name: str, content: bytes, kwargs: dict[str, int], message: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(InvalidInput, match=message):
        load_document(path, owner="me", **kwargs)  # type: ignore[arg-type]


def test_a_missing_file_is_invalid(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="cannot read"):
        load_document(tmp_path / "gone.md", owner="me")


def test_utf8_bom_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "bom.md"
    path.write_bytes("\ufeff# Title\n\nbody".encode())

    (chunk,) = load_document(path, owner="me")

    assert chunk.content.startswith("# Title")
    assert chunk.metadata["heading"] == "Title"


def test_iter_paths_walks_directories(tmp_path: Path) -> None:
    write(tmp_path / "d" / "b.md", "b")
    write(tmp_path / "d" / "a.txt", "a")
    write(tmp_path / "d" / "sub" / "c.py", "c")
    write(tmp_path / "d" / ".git" / "config", "x")
    write(tmp_path / "d" / ".hidden.md", "x")
    single = write(tmp_path / "single.md", "s")

    found = list(iter_paths([tmp_path / "d", single, tmp_path / "d" / "a.txt"]))

    assert found == [
        tmp_path / "d" / "a.txt",
        tmp_path / "d" / "b.md",
        tmp_path / "d" / "sub" / "c.py",
        single,
    ]


def test_iter_paths_rejects_missing_paths(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="no such file or directory"):
        list(iter_paths([tmp_path / "missing"]))


_LINE = st.lists(
    st.text(alphabet="abcdefghij#`~ -.", min_size=0, max_size=30), min_size=0, max_size=40
)


@settings(max_examples=150, deadline=None)
@given(
    lines=_LINE,
    max_tokens=st.integers(min_value=1, max_value=40),
    overlap=st.integers(min_value=0, max_value=39),
)
def test_chunks_cover_the_text_in_order(lines: list[str], max_tokens: int, overlap: int) -> None:
    overlap = min(overlap, max_tokens - 1)

    sections, chunks = chunk_lines(
        lines, markdown=True, max_tokens=max_tokens, overlap_tokens=overlap
    )

    covered: set[tuple[int, int]] = set()  # (0-based line, column) of every chunk character
    last_start = (0, 0)
    for chunk in chunks:
        start, end = chunk.start_line, chunk.end_line
        assert 1 <= start <= end <= len(lines)
        assert (start, chunk.start_column) >= last_start
        last_start = (start, chunk.start_column)
        assert chunk.content.strip() == chunk.content != ""
        assert (
            chunk.content
            == "\n".join(lines[start - 1 : end])[
                chunk.start_column : len("\n".join(lines[start - 1 : end]))
                - (len(lines[end - 1]) - chunk.end_column)
            ]
        )
        assert 0 <= chunk.tokens <= max_tokens
        for number in range(start - 1, end):
            first = chunk.start_column if number == start - 1 else 0
            last = chunk.end_column if number == end - 1 else len(lines[number])
            covered |= {(number, column) for column in range(first, last)}
    # Every non-blank character of a section with body text is in some chunk.
    for section in sections:
        if section.has_body:
            for number in range(section.first_line, section.last_line):
                text = lines[number]
                assert all((number, c) in covered for c, ch in enumerate(text) if not ch.isspace())


def test_load_paths_picks_files_by_format(tmp_path: Path) -> None:
    locomo = [
        {
            "sample_id": "s1",
            "conversation": {
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "Hi Ben."}],
            },
            "qa": [],
        }
    ]
    folder = tmp_path / "in"
    write(folder / "conv.json", json.dumps(locomo))
    write(folder / "note.md", "# Note\n\nbody")
    write(folder / "skip.py", "x = 1")
    named = write(tmp_path / "named.json", json.dumps(locomo))

    auto = load_paths([folder, named], owner="me", root=tmp_path)
    text = load_paths([folder, named], owner="me", root=tmp_path, format="text")
    conversations = load_paths([folder], owner="me", root=tmp_path, format="locomo")

    # auto: documents, plus .json files named on their own (not found in a folder).
    assert (auto.files, auto.skipped) == (2, 2)
    assert [m.owner for m in auto.memories] == ["me", "s1"]
    assert (text.files, text.skipped) == (1, 3)
    assert (conversations.files, conversations.skipped) == (1, 2)
    (turn,) = conversations.memories
    assert turn.owner == "s1"
    assert turn.metadata == {"dia_id": "D1:1", "session": 1}
