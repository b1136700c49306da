"""A real server process (``python -m tribal_memory.interfaces.api.server``) over real HTTP."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tribal_memory.bench.server_process import ServerProcess, ServerStartError, free_port
from tribal_memory.interfaces.server_process import limit_malloc_arenas

STARTUP_TIMEOUT_S = 60.0


@contextlib.contextmanager
def _running(tmp_path: Path, **settings: str) -> Iterator[ServerProcess]:
    """The API server module over a temp data dir: started, yielded, then stopped.

    ``settings``: more ``TRIBAL_*`` environment variables. A server that does
    not start fails the test with its log.
    """
    port = free_port()
    env = {
        "TRIBAL_DATA_DIR": str(tmp_path / "data"),
        "TRIBAL_PORT": str(port),
        "TRIBAL_HOST": "127.0.0.1",
        **settings,
    }
    process = ServerProcess(
        ["-m", "tribal_memory.interfaces.api.server"],
        log_path=tmp_path / "server.log",
        port=port,
        env=env,
        startup_timeout_s=STARTUP_TIMEOUT_S,
    )
    try:
        process.start()
    except ServerStartError as exc:
        pytest.fail(f"{exc.detail}:\n{process.log_text()}")
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """Base URL of a server process over a temp data dir; terminated afterwards."""
    with _running(tmp_path) as process:
        yield process.base_url
    output = process.log_text()
    # uvicorn shuts down gracefully on SIGTERM, then re-raises it (exit -15) or exits 0.
    assert process.returncode in (0, -signal.SIGTERM), output
    assert "Application shutdown complete" in output
    assert "Traceback" not in output


@pytest.mark.slow
def test_capture_and_search_over_http(server: str) -> None:
    with httpx.Client(base_url=server, timeout=30.0) as client:
        health = client.get("/health").json()
        assert health["status"] == "ok"

        created = client.post(
            "/v1/memories", json={"content": "The VPN gateway is vpn.example.org", "tags": ["it"]}
        )
        assert created.status_code == 201
        memory_id = created.json()["memory"]["memory_id"]
        again = client.post("/v1/memories", json={"content": "The VPN gateway is vpn.example.org"})
        assert again.status_code == 200
        assert again.json()["status"] == "exists"

        batch = client.post(
            "/v1/memories/batch",
            json={
                "memories": [
                    {"content": "Lunch is served at noon"},
                    {"content": "The fire drill is on Thursday"},
                    {"content": "Parking permits renew in January"},
                ]
            },
        )
        assert batch.status_code == 200

        found = client.post("/v1/search", json={"query": "what is the VPN address?", "k": 3})
        assert found.status_code == 200
        body = found.json()
        assert body["mode"] == "hybrid"
        assert body["hits"][0]["memory_id"] == memory_id
        assert all(0.0 <= hit["score"] <= 1.0 for hit in body["hits"])

        bad = client.post(
            "/v1/search", content=b"{oops", headers={"content-type": "application/json"}
        )
        assert bad.status_code == 400
        assert bad.json()["error"] == "invalid_request"
        assert client.get("/schema/swagger").status_code == 200


def _run_server(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tribal_memory.interfaces.api.server"],
        env={**os.environ, "TRIBAL_PORT": str(free_port()), **env},
        capture_output=True,
        text=True,
        timeout=STARTUP_TIMEOUT_S,
        check=False,
    )


@pytest.mark.slow
def test_invalid_settings_exit_cleanly(tmp_path: Path) -> None:
    result = _run_server({"TRIBAL_DATA_DIR": str(tmp_path), "TRIBAL_PORT": "not-a-port"})
    assert result.returncode == 2
    assert "invalid settings" in result.stderr and "port" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


@pytest.mark.slow
def test_unusable_data_dir_exits_with_a_message(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    result = _run_server({"TRIBAL_DATA_DIR": str(blocker / "data")})
    assert result.returncode == 1
    assert result.stderr.startswith("error: cannot create data dir")
    assert "Traceback" not in result.stderr + result.stdout


def test_malloc_arenas_are_capped_on_glibc_and_zero_keeps_the_default() -> None:
    import platform

    assert limit_malloc_arenas(0) is False
    glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert limit_malloc_arenas(2) is glibc


def test_blas_is_limited_to_the_threads_asked_and_zero_keeps_the_default() -> None:
    # In a child process: the limit is process-wide.
    script = (
        "import json, numpy\n"
        "from threadpoolctl import threadpool_info\n"
        "from tribal_memory.interfaces.server_process import limit_blas_threads\n"
        "def blas():\n"
        "    return [i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas']\n"
        "before = blas()\n"
        "kept = limit_blas_threads(0), blas()\n"
        "print(json.dumps([before, kept, limit_blas_threads(1), blas()]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    before, (set_for_zero, after_zero), set_for_one, after_one = json.loads(result.stdout)
    assert before  # numpy's BLAS was found
    assert (set_for_zero, after_zero) == (False, before)
    assert set_for_one is True
    assert set(after_one) == {1}


@pytest.mark.slow
def test_the_browser_probe_is_refused_by_a_real_server(server: str) -> None:
    """The curl of issue 13 against the keyless loopback default: nothing is stored."""
    plant = b'{"content":"x","owner":"shared"}'
    with httpx.Client(base_url=server, timeout=30.0) as client:
        probe = client.post(
            "/v1/memories",
            content=plant,
            headers={
                "origin": "http://evil.example",
                "host": "evil.example",
                "content-type": "text/plain",
            },
        )
        assert probe.status_code == 421 and probe.json()["error"] == "invalid_host"
        plain = client.post("/v1/memories", content=plant, headers={"content-type": "text/plain"})
        assert plain.status_code == 415 and plain.json()["error"] == "unsupported_media_type"
        foreign = client.post(
            "/v1/memories",
            content=plant,
            headers={"origin": "http://evil.example", "content-type": "application/json"},
        )
        assert foreign.status_code == 403 and foreign.json()["error"] == "forbidden_origin"
        assert client.get("/v1/stats").json()["memories"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("access_log", ["true", "false"])
def test_the_access_log_follows_the_setting(tmp_path: Path, access_log: str) -> None:
    with (
        _running(tmp_path, TRIBAL_ACCESS_LOG=access_log) as process,
        httpx.Client(base_url=process.base_url, timeout=30.0) as client,
    ):
        searched = client.post("/v1/search", json={"query": "where is the VPN gateway"})
        assert searched.status_code == 200
    output = process.log_text()
    assert "Application startup complete" in output  # the server's own lines stay
    assert ('"POST /v1/search HTTP/1.1" 200' in output) == (access_log == "true")
