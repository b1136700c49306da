"""The web dashboard at ``/ui``: server-rendered pages over the same service and auth as the API.

Pages (Jinja2 templates, htmx for the parts that change; both ship in the
package, nothing loads from elsewhere): memories (browse, one memory, edit,
delete), the search playground, learning at a glance and documents. Every
handler takes the API's ``service``, ``caller`` and ``owner_scope``
dependencies, so owner scoping, limits and error codes are the API's.
"""

from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from litestar import Router, get
from litestar.di import Provide
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.response import Redirect
from litestar.static_files import create_static_files_router
from litestar.template.config import TemplateConfig

from tribal_memory.base.models import version_of
from tribal_memory.interfaces.api.auth import PUBLIC
from tribal_memory.interfaces.dashboard.common import provide_form_owner_scope, same_origin_forms
from tribal_memory.interfaces.dashboard.documents import document_tree, documents_page, optimize
from tribal_memory.interfaces.dashboard.errors import DASHBOARD_EXCEPTION_HANDLERS
from tribal_memory.interfaces.dashboard.learning import learning_page
from tribal_memory.interfaces.dashboard.login import login, login_form, logout
from tribal_memory.interfaces.dashboard.memories import MemoryPages
from tribal_memory.interfaces.dashboard.search import search_page

DASHBOARD_PATH = "/ui"
STATIC_DIR = Path(__file__).parent / "static"
HTMX_FILE = "vendor/htmx-2.0.11.min.js"
"""The vendored htmx (npm ``htmx.org`` 2.0.11, 0BSD licence beside it), under ``/ui/static``."""


@get("/", include_in_schema=False)
async def home() -> Redirect:
    """``/ui`` opens the memories."""
    return Redirect("/ui/memories", status_code=303)


def template_config() -> TemplateConfig[JinjaTemplateEngine]:
    """Jinja2 over the package's templates: autoescaping on, undefined names an error."""
    environment = Environment(
        loader=PackageLoader("tribal_memory.interfaces.dashboard", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.globals["htmx_js"] = f"{DASHBOARD_PATH}/static/{HTMX_FILE}"
    environment.filters["version"] = version_of
    return TemplateConfig(instance=JinjaTemplateEngine.from_environment(environment))


def dashboard_router() -> Router:
    """The ``/ui`` router: pages, login, and the static files (public, like the login form)."""
    static = create_static_files_router(
        path="/static",
        directories=[STATIC_DIR],
        name="dashboard-static",
        include_in_schema=False,
        opt=PUBLIC,
    )
    return Router(
        path=DASHBOARD_PATH,
        route_handlers=[
            home,
            login_form,
            login,
            logout,
            MemoryPages,
            search_page,
            learning_page,
            documents_page,
            document_tree,
            optimize,
            static,
        ],
        dependencies={"owner_scope": Provide(provide_form_owner_scope, sync_to_thread=False)},
        guards=[same_origin_forms],
        exception_handlers=DASHBOARD_EXCEPTION_HANDLERS,
        include_in_schema=False,
    )
