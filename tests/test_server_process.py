"""A real server process (``python -m tribal_memory.api.server``) answering over real HTTP."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

STARTUP_TIMEOUT_S = 60.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_until_up(process: subprocess.Popen[bytes], base_url: str, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"server exited with {process.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"{base_url}/health", timeout=2.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    pytest.fail(f"server not up after {STARTUP_TIMEOUT_S} s:\n{log.read_text()}")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """Base URL of a server process over a temp data dir; terminated afterwards."""
    port = _free_port()
    env = {
        **os.environ,
        "TRIBAL_DATA_DIR": str(tmp_path / "data"),
        "TRIBAL_PORT": str(port),
        "TRIBAL_HOST": "127.0.0.1",
    }
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "tribal_memory.api.server"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base_url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(process, base_url, log)
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
    output = log.read_text()
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
        [sys.executable, "-m", "tribal_memory.api.server"],
        env={**os.environ, "TRIBAL_PORT": str(_free_port()), **env},
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
