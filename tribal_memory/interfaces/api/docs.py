"""OpenAPI at ``/schema`` with a Swagger UI that works offline.

Litestar's Swagger plugin loads its JS and CSS from a CDN by default. The
``swagger-ui-bundle-v2`` package ships those files; they are served from
:data:`SWAGGER_STATIC_PATH` and the UI page at ``/schema/swagger`` points only there.
"""

from __future__ import annotations

from pathlib import Path

import swagger_ui_bundle
from litestar import Router
from litestar.openapi.config import OpenAPIConfig
from litestar.openapi.plugins import SwaggerRenderPlugin
from litestar.openapi.spec import Components, SecurityScheme
from litestar.static_files import create_static_files_router

from tribal_memory import __version__

SWAGGER_STATIC_PATH = "/schema/static"
"""Where the vendored Swagger UI files are served."""

_FAVICON = f"{SWAGGER_STATIC_PATH}/favicon-32x32.png"


def swagger_ui_dir() -> Path:
    """Directory of the vendored Swagger UI (``swagger-ui-bundle.js`` and friends)."""
    return Path(str(swagger_ui_bundle.swagger_ui_path))


def swagger_static_router() -> Router:
    """Router serving the vendored Swagger UI files under :data:`SWAGGER_STATIC_PATH`."""
    return create_static_files_router(
        path=SWAGGER_STATIC_PATH,
        directories=[swagger_ui_dir()],
        name="swagger-static",
        include_in_schema=False,
    )


def openapi_config() -> OpenAPIConfig:
    """OpenAPI document at ``/schema/openapi.json``, Swagger UI at ``/schema/swagger``."""
    swagger = SwaggerRenderPlugin(
        js_url=f"{SWAGGER_STATIC_PATH}/swagger-ui-bundle.js",
        css_url=f"{SWAGGER_STATIC_PATH}/swagger-ui.css",
        standalone_preset_js_url=f"{SWAGGER_STATIC_PATH}/swagger-ui-standalone-preset.js",
        favicon=f"<link rel='icon' type='image/png' href='{_FAVICON}'>",
        path="/swagger",
    )
    return OpenAPIConfig(
        title="tribal-memory",
        version=__version__,
        description=(
            "Memory server for AI agents. Errors are always "
            '{"error": code, "detail": message, "status": http_status}. '
            "When API keys are required (TRIBAL_AUTH), send 'Authorization: Bearer <key>'."
        ),
        components=Components(
            security_schemes={"apiKey": SecurityScheme(type="http", scheme="bearer")}
        ),
        security=[{"apiKey": []}],
        path="/schema",
        render_plugins=[swagger],
        # Each operation is described by its handler's docstring (Swagger UI and the docs
        # site's HTTP reference, generated from this schema, show it).
        use_handler_docstrings=True,
    )
