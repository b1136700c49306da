"""Text of PDF files, page by page, with pypdf."""

from __future__ import annotations

import logging
from io import BytesIO

from tribal_memory.errors import InvalidInput


def pdf_pages(data: bytes, name: str) -> list[str]:
    """The extracted text of each page of a PDF, in page order.

    A file encrypted with an empty user password (owner restrictions only) is
    opened; one that needs a password is refused.

    Args:
        data: The file's bytes.
        name: How to name the file in error messages.

    Returns:
        One string per page (empty for a page without text); at least one
        page has text.

    Raises:
        InvalidInput: not a readable PDF (corrupt or truncated), encrypted
            with a password, or without any extractable text (scanned pages).
    """
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError

    # pypdf logs a warning for every repairable flaw of a file; they would reach the
    # terminal through logging's last-resort handler. Errors still surface as exceptions.
    logging.getLogger("pypdf").setLevel(logging.ERROR)

    try:
        reader = PdfReader(BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise InvalidInput(f"{name}: the PDF is encrypted with a password; decrypt it first")
        pages = [page.extract_text() or "" for page in reader.pages]
    except InvalidInput:
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
