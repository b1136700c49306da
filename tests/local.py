"""Where in-process test clients send requests from.

Litestar's ``TestClient`` defaults to the host ``testserver.local``, which the
server's Host allow-list refuses (421, see ``tribal_memory.interfaces.api.browser``);
tests talk to it as local clients do.
"""

LOCAL_URL = "http://127.0.0.1"
