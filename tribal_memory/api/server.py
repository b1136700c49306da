"""Serve the HTTP API with uvicorn: ``run(settings)`` or ``python -m tribal_memory.api.server``.

Run as a module, settings come from the environment (``TRIBAL_DATA_DIR``,
``TRIBAL_PORT``, ``TRIBAL_HOST``, ...; see :class:`~tribal_memory.config.Settings`).
"""

from __future__ import annotations

import sys

import uvicorn
from pydantic import ValidationError

from tribal_memory.api.app import create_app
from tribal_memory.config import Settings


def run(settings: Settings) -> None:
    """Serve the API on ``settings.host:settings.port`` until interrupted (blocks).

    The model and stores open during startup; if that fails (e.g.
    ``EmbeddingModelMismatch``) uvicorn logs the error and the process exits
    with status 3.
    """
    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level="info",
    )


def main() -> None:
    """Entry point of ``python -m tribal_memory.api.server``; exits 2 on invalid settings."""
    try:
        settings = Settings()
    except ValidationError as exc:
        print(f"invalid settings: {exc}", file=sys.stderr)
        sys.exit(2)
    run(settings)


if __name__ == "__main__":
    main()
