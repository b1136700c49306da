"""The HTTP API (Litestar): ``create_app(settings)`` and, in :mod:`.server`, ``run(settings)``."""

from tribal_memory.interfaces.api.app import create_app

__all__ = ["create_app"]
