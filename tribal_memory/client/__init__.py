"""The HTTP client: a running tribal-memory server with :class:`MemoryService`'s methods.

:class:`TribalMemoryClient` (blocking) and :class:`AsyncTribalMemoryClient`
(``await``-ed) send each call to the server's JSON API over httpx, return the
``base/`` dataclasses the library returns (:class:`~tribal_memory.Memory`,
:class:`~tribal_memory.SearchResult`, ...) and raise the library's exceptions
(:class:`~tribal_memory.NotFound`, ...), so code written against
:class:`~tribal_memory.base.api.MemoryAPI` runs in process or against a server::

    from tribal_memory import MemoryInput, SearchFilters
    from tribal_memory.client import TribalMemoryClient

    with TribalMemoryClient("http://127.0.0.1:18960", api_key="...") as memory:
        memory.capture(MemoryInput("The VPN gateway is vpn.example.org", owner="alice"))
        hits = memory.search("vpn host", filters=SearchFilters(owner="alice")).hits

The base URL and key default to ``TRIBAL_URL`` and ``TRIBAL_API_KEY``.
Importing this package loads no LanceDB, model or web server.
"""

from typing import TYPE_CHECKING

from tribal_memory.base.api import LOCAL_ONLY, MemoryAPI
from tribal_memory.client._async import AsyncTribalMemoryClient
from tribal_memory.client._sync import TribalMemoryClient
from tribal_memory.client._wire import WireError

__all__ = ["LOCAL_ONLY", "AsyncTribalMemoryClient", "MemoryAPI", "TribalMemoryClient", "WireError"]

if TYPE_CHECKING:

    def _conforms(client: TribalMemoryClient) -> MemoryAPI:
        """Mypy checks here that the client has :class:`MemoryAPI`'s methods and types."""
        return client
