"""Generated requests (schemathesis) against every operation of the OpenAPI schema.

A real server (uvicorn in a thread, 127.0.0.1, a free port) over a temp data
dir; each operation gets up to ``EXAMPLES`` generated cases, valid and
invalid. No answer may be a 5xx, and every error must have the documented
shape ``{"error", "detail", "status"}``.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import schemathesis
import uvicorn
from hypothesis import HealthCheck, Phase, settings
from schemathesis.core import NotSet

from tribal_memory.base.config import Settings
from tribal_memory.bench.server_process import free_port, wait_until_healthy
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.interfaces.api import create_app

EXAMPLES = 40
"""Generated cases per operation (about 30 operations: over 1,000 in all)."""
CASES: list[str] = []
FRAMING_HEADERS = {"content-length", "transfer-encoding"}
"""Headers that frame the message: a bad one is refused by the HTTP server, not the app."""
HTTP_SERVER_REFUSAL = "Invalid HTTP request received."
"""uvicorn's plain-text 400 for a request that is not valid HTTP/1.1."""


def _refused_as_invalid_http(case: schemathesis.Case, response: schemathesis.Response) -> bool:
    """True when generated framing headers made the request invalid HTTP (an empty
    Content-Length, say): uvicorn answers 400 before any handler runs (RFC 9112
    section 6.3), so the answer is its plain text, not the API's JSON error."""
    framed = any(name.lower() in FRAMING_HEADERS for name in case.headers or {})
    return framed and response.status_code == 400 and response.text == HTTP_SERVER_REFUSAL


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data: Path = tmp_path_factory.mktemp("schemathesis") / "data"
    port = free_port()
    app = create_app(
        Settings(data_dir=data, auth="off", max_request_bytes=64 * 1024),
        embedder=FastEmbedEmbedder(),
    )
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    wait_until_healthy(f"{url}/health", timeout_s=60)
    httpx.post(f"{url}/v1/memories", json={"content": "The printer is on floor 3"})
    yield url
    server.should_exit = True
    thread.join(timeout=30)


def _openapi() -> dict[str, object]:
    # Building the app does not open the service: its schema needs no data dir.
    app = create_app(Settings(data_dir=Path("/nonexistent"), auth="off"))
    document: dict[str, object] = app.openapi_schema.to_schema()
    return document


@schemathesis.serializer("application/x-ndjson")
def _ndjson(_ctx: schemathesis.SerializationContext, value: object) -> dict[str, bytes]:
    """Import bodies: generated values as JSON lines (bytes and text as they are)."""
    if isinstance(value, bytes):
        return {"data": value}
    if isinstance(value, str):
        return {"data": value.encode()}
    items = value if isinstance(value, list) else [value]
    return {"data": "".join(json.dumps(item) + "\n" for item in items).encode()}


schema = schemathesis.openapi.from_dict(_openapi())


@pytest.mark.slow
@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
    # The same cases on every run, so the suite is a reproducible gate; set
    # TRIBAL_FUZZ_RANDOM=1 to explore new cases (how the year-999 filter bug was found).
    derandomize=os.environ.get("TRIBAL_FUZZ_RANDOM") != "1",
)
def test_no_5xx_and_errors_in_the_documented_shape(case: schemathesis.Case, base_url: str) -> None:
    response = case.call(base_url=base_url, timeout=30)
    CASES.append(case.operation.label)
    where = f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:300]}"
    assert response.status_code < 500, where
    if _refused_as_invalid_http(case, response):
        return
    if response.status_code >= 400:
        body = response.json()
        assert set(body) == {"error", "detail", "status"}, where
        assert body["status"] == response.status_code, where
        assert isinstance(body["error"], str) and isinstance(body["detail"], str), where


BROWSER_CASES = settings(
    max_examples=3,
    phases=[Phase.generate],  # generated cases only: schemathesis's explicit ones are many
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
    derandomize=True,
)
"""A few generated cases per operation for the browser checks (they only send headers)."""

BROWSER_ATTACKS = {
    "foreign host": ({"host": "evil.example"}, 421, "invalid_host"),
    "foreign origin": ({"origin": "http://evil.example"}, 403, "forbidden_origin"),
    "null origin": ({"origin": "null"}, 403, "forbidden_origin"),
}
"""Headers a web page (DNS rebinding, a cross-site request) would send, and the answer."""


def _stored(base_url: str) -> int:
    count: int = httpx.get(f"{base_url}/v1/stats").json()["memories"]
    return count


@pytest.mark.slow
@pytest.mark.parametrize("attack", sorted(BROWSER_ATTACKS))
@schema.parametrize()
@BROWSER_CASES
def test_browser_requests_are_refused_on_every_operation(
    case: schemathesis.Case, base_url: str, attack: str
) -> None:
    headers, status, code = BROWSER_ATTACKS[attack]
    before = _stored(base_url)
    response = case.call(base_url=base_url, headers=headers, timeout=30)
    where = f"{attack}: {case.method} {case.formatted_path} -> {response.status_code}"
    if response.status_code == 405:  # a method the route lacks (generated): never routed
        assert _stored(base_url) == before, where
        return
    if case.operation.path == "/health" or case.operation.path.startswith("/schema"):
        # Public, read-only routes: the Host check holds them too; an Origin on a
        # GET of public docs reads nothing a page could not fetch itself.
        assert response.status_code in (200, status, 404), where
    else:
        assert response.status_code == status, where
        assert response.json() == {
            "error": code,
            "detail": response.json()["detail"],
            "status": status,
        }
    assert _stored(base_url) == before, where


@pytest.mark.slow
@schema.parametrize()
@BROWSER_CASES
def test_simple_request_bodies_are_415(case: schemathesis.Case, base_url: str) -> None:
    """Bodies a page can send without a preflight (text/plain, forms) never reach a handler."""
    if isinstance(case.body, NotSet) or case.media_type is None:
        return  # no body: nothing a page could plant
    if case.method.upper() != case.operation.method.upper():
        return  # a generated call of another method (OPTIONS, TRACE): no body is read
    before = _stored(base_url)
    for media_type in ("text/plain", "application/x-www-form-urlencoded"):
        raw = json.dumps(case.body, default=str).encode()
        response = httpx.request(
            case.method,
            f"{base_url}{case.formatted_path}",
            params=case.query,
            content=raw,
            headers={"content-type": media_type},
            timeout=30,
        )
        where = f"{media_type}: {case.method} {case.formatted_path} -> {response.status_code}"
        if response.status_code == 405:  # a method the route lacks (generated): never routed
            continue
        assert response.status_code == 415, where
        assert response.json()["error"] == "unsupported_media_type", where
    assert _stored(base_url) == before


@pytest.mark.slow
def test_over_a_thousand_cases_ran() -> None:
    """Runs after the generated cases (file order); counts them when all operations ran."""
    operations = set(CASES)
    if len(operations) < len(list(schema.get_all_operations())):
        pytest.skip("only part of the generated tests ran (-k or -x)")
    print(f"schemathesis: {len(CASES)} cases over {len(operations)} operations")
    assert len(CASES) >= 1000
