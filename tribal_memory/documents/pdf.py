"""Text of PDF files, page by page, with pypdf, in a worker process with bounds.

A PDF's streams are compressed: a file of a few KB can expand into millions
of characters (an 18 KB Flate-compressed file gave 5.2 M characters and took
13 s), so extraction is bounded four ways: it runs in a separate worker
process (a bomb's memory and CPU are not the server's, and a stuck
extraction can be killed); before a page is parsed, its content streams
(with the form XObjects they draw) are decoded and measured, and a page over
:data:`MAX_PAGE_CONTENT_BYTES`, or a document over
:func:`max_content_bytes`, is refused (parsing runs at about 2 MB/s, so a
20 KB file whose one stream decodes to 5 MB of operators would hold the
worker for seconds, and one with many such pages for a minute); a page's
extraction stops as soon as the text so far passes ``max_chars``
characters (checked as pypdf emits each piece, not after the page); and it
is killed after ``timeout_s`` seconds. The worker (``multiprocessing``,
spawned: the server's threads are not forked) is started on first use and
kept for the next PDF.
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing
import threading
from io import BytesIO
from multiprocessing.pool import Pool
from typing import Any

from tribal_memory.base.errors import InvalidInput, TooLarge

_WORKER_START_TIMEOUT_S = 120.0
"""Longest wait for a new worker process to answer (it imports pypdf)."""
_TASKS_PER_WORKER = 50
"""PDFs a worker extracts before it is replaced (returns what a large one took)."""

MAX_PAGE_CONTENT_BYTES = 4 * 1024 * 1024
"""Most decoded bytes of one page's content streams and form XObjects (a dense page
of text has tens of KB; a detailed vector drawing a few MB)."""
MIN_DOCUMENT_CONTENT_BYTES = 16 * 1024 * 1024
"""Decoded content every PDF may have, however small the file."""
CONTENT_BYTES_PER_FILE_BYTE = 64
"""Decoded content allowed per byte of file past that (content streams compress
3-10 times; a bomb hundreds of times)."""

_lock = threading.Lock()


def max_content_bytes(file_bytes: int) -> int:
    """Most decoded content-stream bytes of a PDF of ``file_bytes`` bytes, all pages together."""
    return max(MIN_DOCUMENT_CONTENT_BYTES, CONTENT_BYTES_PER_FILE_BYTE * file_bytes)


class _PageTextCap(Exception):
    """Raised from pypdf's text visitor to stop a page whose text is over the limit."""


def _stream_bytes(obj: Any, seen: set[int]) -> int:
    """Decoded bytes of the form XObjects in ``obj``'s resources (nested ones too), each once."""
    resources = obj.get("/Resources")
    xobjects = resources.get_object().get("/XObject") if resources is not None else None
    if xobjects is None:
        return 0
    total = 0
    for ref in xobjects.get_object().values():
        form = ref.get_object()
        key = ref.idnum if hasattr(ref, "idnum") else id(form)
        if key in seen:
            continue
        seen.add(key)
        if form.get("/Subtype") == "/Form":
            total += len(form.get_data()) + _stream_bytes(form, seen)
    return total


def _page_content_bytes(page: Any) -> int:
    """Decoded bytes of ``page``'s content streams plus the form XObjects it can draw."""
    contents = page.get_contents()
    return (len(contents.get_data()) if contents is not None else 0) + _stream_bytes(page, set())


def _page_text(page: Any, budget: int) -> str:
    """The page's text; raises :class:`_PageTextCap` once it passes ``budget`` characters."""
    seen = 0

    def count(text: str, *_: Any) -> None:
        nonlocal seen
        seen += len(text)
        if seen > budget:
            raise _PageTextCap

    return page.extract_text(visitor_text=count) or ""


_pool: Pool | None = None


def extract_pages(data: bytes, name: str, max_chars: int) -> list[str]:
    """The extracted text of each page of a PDF, in page order (runs in this process).

    Prefer :func:`pdf_pages`, which runs this in the worker with a time bound.
    A file encrypted with an empty user password (owner restrictions only) is
    opened; one that needs a password is refused.

    Args:
        data: The file's bytes.
        name: How to name the file in error messages.
        max_chars: Most characters of text in all pages together; checked
            as each piece of a page's text is extracted.

    Returns:
        One string per page (empty for a page without text); at least one
        page has text.

    Raises:
        InvalidInput: not a readable PDF (corrupt or truncated), encrypted
            with a password, or without any extractable text (scanned pages).
        TooLarge: the text is over ``max_chars`` characters, or the content
            streams decode to more bytes than :data:`MAX_PAGE_CONTENT_BYTES` on
            one page or :func:`max_content_bytes` in all (checked for every
            page before any is parsed).
    """
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError

    # pypdf logs a warning for every repairable flaw of a file; they would reach the
    # terminal through logging's last-resort handler. Errors still surface as exceptions.
    logging.getLogger("pypdf").setLevel(logging.ERROR)

    pages: list[str] = []
    total = 0
    try:
        reader = PdfReader(BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise InvalidInput(f"{name}: the PDF is encrypted with a password; decrypt it first")
        content, content_limit = 0, max_content_bytes(len(data))
        # Every page is measured before any is parsed: parsing costs far more than
        # decoding, so a document over the limit is refused without parsing a page.
        for number, page in enumerate(reader.pages, start=1):
            size = _page_content_bytes(page)
            content += size
            if size > MAX_PAGE_CONTENT_BYTES:
                raise _too_much_content(name, MAX_PAGE_CONTENT_BYTES, f"on page {number}")
            if content > content_limit:
                raise _too_much_content(name, content_limit, f"by page {number}")
        for number, page in enumerate(reader.pages, start=1):
            try:
                text = _page_text(page, max_chars - total)
            except _PageTextCap:
                raise _too_much_text(name, max_chars, number) from None
            total += len(text)
            if total > max_chars:
                raise _too_much_text(name, max_chars, number)
            pages.append(text)
    except (InvalidInput, TooLarge):
        raise
    except (DependencyError, FileNotDecryptedError) as exc:
        raise InvalidInput(f"{name}: the PDF is encrypted and cannot be opened: {exc}") from exc
    # pypdf raises many types on malformed files (PdfReadError, ValueError, KeyError, ...).
    except Exception as exc:  # noqa: BLE001
        raise InvalidInput(f"{name}: not a readable PDF: {type(exc).__name__}: {exc}") from exc
    if not any(page.strip() for page in pages):
        raise InvalidInput(
            f"{name}: the PDF has no extractable text (scanned pages need OCR first)"
        )
    return pages


def _too_much_text(name: str, max_chars: int, number: int) -> TooLarge:
    return TooLarge(
        f"{name}: the PDF's text is over {max_chars} characters by page {number} "
        "(TRIBAL_MAX_DOCUMENT_CHARS)"
    )


def _too_much_content(name: str, limit: int, where: str) -> TooLarge:
    return TooLarge(
        f"{name}: the PDF's content streams decode to over {limit} bytes {where}, more "
        "than its text could need (a compressed stream can expand a thousandfold); "
        "its text was not extracted"
    )


def _ready() -> bool:
    return True


def _worker() -> Pool:
    """The running worker pool (one process), started and checked on first use."""
    global _pool
    if _pool is None:
        pool = multiprocessing.get_context("spawn").Pool(1, maxtasksperchild=_TASKS_PER_WORKER)
        try:
            pool.apply_async(_ready).get(_WORKER_START_TIMEOUT_S)
        except multiprocessing.TimeoutError as exc:
            pool.terminate()
            raise InvalidInput("the PDF text extractor did not start") from exc
        _pool = pool
    return _pool


def _stop_worker() -> None:
    global _pool
    if _pool is not None:
        _pool.terminate()
        _pool.join()
        _pool = None


atexit.register(_stop_worker)


def pdf_pages(data: bytes, name: str, *, max_chars: int, timeout_s: float) -> list[str]:
    """:func:`extract_pages` in the worker process, killed after ``timeout_s`` seconds.

    One PDF is extracted at a time per process (a second caller waits for
    the first; its own time bound starts when its extraction does).

    Returns:
        As :func:`extract_pages`.

    Raises:
        InvalidInput: as :func:`extract_pages`, or the worker could not start.
        TooLarge: over ``max_chars`` characters, or extraction took over
            ``timeout_s`` seconds (the worker is killed and replaced).
    """
    with _lock:
        pending = _worker().apply_async(extract_pages, (data, name, max_chars))
        try:
            return pending.get(timeout_s)
        except multiprocessing.TimeoutError:
            _stop_worker()
            raise TooLarge(
                f"{name}: extracting the PDF's text took over {timeout_s:g} s "
                "(TRIBAL_PDF_TIMEOUT_S)"
            ) from None
