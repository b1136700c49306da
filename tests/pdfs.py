"""PDFs built byte by byte for the PDF limit tests (no PDF library writes these shapes)."""

from __future__ import annotations

import base64
import zlib


def pdf_of(content: bytes, pages: int = 1) -> bytes:
    """A PDF of ``pages`` pages that all draw one Flate-compressed ``content`` stream."""
    stream = zlib.compress(content, 9)
    kids = " ".join(f"{3 + i} 0 R" for i in range(pages)).encode()
    contents, font = 3 + pages, 4 + pages
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % pages,
        *(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
            b"/Resources << /Font << /F1 %d 0 R >> >> >>" % (contents, font)
            for _ in range(pages)
        ),
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def pdf_body(data: bytes) -> dict[str, str]:
    """The ``POST /v1/documents`` body of a PDF named ``bomb.pdf``."""
    return {"path": "bomb.pdf", "content_base64": base64.b64encode(data).decode("ascii")}
