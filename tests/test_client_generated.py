"""The HTTP client's pure parts: the generated sync twin, error map, strict decoding, imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from tribal_memory.base import errors
from tribal_memory.client import _wire as wire

ROOT = Path(__file__).resolve().parent.parent


def test_sync_client_is_generated_from_the_async_one() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "unasync.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def _subclasses(cls: type[errors.TribalError]) -> list[type[errors.TribalError]]:
    """``cls`` and its subclasses in ``base/errors.py`` (the codes the server sends)."""
    below = [c for sub in cls.__subclasses__() for c in _subclasses(sub)]
    return [c for c in (cls, *below) if c.__module__ == errors.__name__]


@pytest.mark.parametrize("cls", _subclasses(errors.TribalError), ids=lambda c: c.__name__)
def test_every_error_code_maps_back_to_its_class(cls: type[errors.TribalError]) -> None:
    body = msgspec.json.encode({"error": cls.code, "detail": "why", "status": cls.status})
    error = wire.error_for(cls.status, body)
    assert type(error) is cls and error.detail == "why"


def test_unknown_codes_and_foreign_bodies_stay_tribal_errors() -> None:
    error = wire.error_for(418, b'{"error": "teapot", "detail": "short and stout", "status": 418}')
    assert type(error) is errors.TribalError
    assert (error.code, error.status, error.detail) == ("teapot", 418, "short and stout")
    proxy = wire.error_for(502, b"<html>Bad Gateway</html>")
    assert proxy.status == 502 and "Bad Gateway" in proxy.detail
    body_shape = wire.error_for(400, b'{"error": "invalid_request", "detail": "x", "status": 400}')
    assert isinstance(body_shape, errors.InvalidInput)


MEMORY = {
    "memory_id": "m1",
    "content": "c",
    "owner": "o",
    "kind": "fact",
    "tags": ["a"],
    "source": None,
    "doc_id": None,
    "chunk_index": None,
    "parent_id": None,
    "created_at": "2026-01-01T00:00:00Z",
    "updated_at": "2026-01-01T00:00:00Z",
    "event_time": None,
    "metadata": {},
}


def test_strict_decoding_refuses_unknown_fields_and_lenient_ignores_them() -> None:
    memory = wire.decode_memory(MEMORY, strict=True)
    assert memory.tags == ("a",) and memory.created_at.tzinfo is not None
    newer = {**MEMORY, "colour": "blue"}
    assert wire.decode_memory(newer) == memory
    with pytest.raises(wire.WireError, match="colour"):
        wire.decode_memory(newer, strict=True)
    with pytest.raises(wire.WireError):
        wire.decode_memory({**MEMORY, "created_at": "yesterday"})


def test_importing_the_client_loads_no_store_model_or_server() -> None:
    code = (
        "import sys, tribal_memory.client\n"
        "heavy = [m for m in ('lancedb', 'fastembed', 'litestar', 'onnxruntime', 'sqlalchemy',"
        " 'tribal_memory.service', 'tribal_memory.store') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""
