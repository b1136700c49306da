"""Text of PDF files, page by page, with pypdf, in a worker process with bounds.

A PDF's streams are compressed: a file of a few KB can expand into millions
of characters (an 18 KB Flate-compressed file gave 5.2 M characters and took
13 s), so extraction is bounded three ways: it runs in a separate worker
process (a bomb's memory and CPU are not the server's, and a stuck
extraction can be killed), it stops as soon as the pages extracted so far
exceed ``max_chars`` characters, and it is killed after ``timeout_s``
seconds. The worker (``multiprocessing``, spawned: the server's threads are
not forked) is started on first use and kept for the next PDF.
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing
import threading
from io import BytesIO
from multiprocessing.pool import Pool

from tribal_memory.base.errors import InvalidInput, TooLarge

_WORKER_START_TIMEOUT_S = 120.0
"""Longest wait for a new worker process to answer (it imports pypdf)."""
_TASKS_PER_WORKER = 50
"""PDFs a worker extracts before it is replaced (returns what a large one took)."""

_lock = threading.Lock()
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
            after each page, so extraction stops soon after the limit.

    Returns:
        One string per page (empty for a page without text); at least one
        page has text.

    Raises:
        InvalidInput: not a readable PDF (corrupt or truncated), encrypted
            with a password, or without any extractable text (scanned pages).
        TooLarge: the text is over ``max_chars`` characters.
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
        for number, page in enumerate(reader.pages, start=1):
            text = page.extract_text() or ""
            total += len(text)
            if total > max_chars:
                raise TooLarge(
                    f"{name}: the PDF's text is over {max_chars} characters by page {number} "
                    "(TRIBAL_MAX_DOCUMENT_CHARS)"
                )
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
