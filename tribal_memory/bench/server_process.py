"""Server processes on loopback ports: start one, wait until it answers, stop it.

Shared by the benchmarks (``bench perf``, ``benchmarks/demo.py``,
``benchmarks/crash.py``) and the tests that drive real processes. A child
imports the same ``tribal_memory`` as the process starting it (its package
directory is put first on ``PYTHONPATH``), and binds 127.0.0.1 only.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

import httpx

from tribal_memory.base.errors import TribalError

LOOPBACK = "127.0.0.1"
STARTUP_TIMEOUT_S = 120.0


class ServerStartError(TribalError):
    """A server process exited, or did not answer, while starting (the detail names its log)."""


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port on ``host`` that was free a moment ago (another process may take it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment plus ``extra``, with this ``tribal_memory`` importable first.

    ``PYTHONSAFEPATH=1`` keeps ``python -m`` from putting the working
    directory before ``PYTHONPATH``: without it a server started from a
    checkout imported that checkout's package whatever ``PYTHONPATH`` said
    (so two checkouts compared from one of them ran the same code).
    """
    package_root = str(Path(__file__).resolve().parent.parent)
    path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "PYTHONSAFEPATH": "1", **(extra or {})}


def wait_until_healthy(
    url: str,
    *,
    process: subprocess.Popen[bytes] | None = None,
    timeout_s: float = STARTUP_TIMEOUT_S,
    log_path: Path | None = None,
) -> None:
    """Poll ``GET url`` until it answers 200.

    Args:
        url: A health URL, e.g. ``http://127.0.0.1:18960/health``.
        process: The server process; its exit ends the wait at once.
        timeout_s: Longest wait, in seconds.
        log_path: Named in the error (where the server's output went).

    Raises:
        ServerStartError: the process exited, or no 200 came within ``timeout_s``.
    """
    where = f"; see {log_path}" if log_path is not None else ""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise ServerStartError(f"the server exited with code {process.returncode}{where}")
        try:
            if httpx.get(url, timeout=2.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise ServerStartError(f"the server did not answer {url} within {timeout_s:.0f} s{where}")


def wait_for_port(
    port: int,
    *,
    process: subprocess.Popen[bytes] | None = None,
    timeout_s: float = STARTUP_TIMEOUT_S,
    log_path: Path | None = None,
    host: str = LOOPBACK,
) -> None:
    """Wait until something accepts TCP connections on ``host:port`` (servers without /health).

    Raises:
        ServerStartError: the process exited, or nothing listened within ``timeout_s``.
    """
    where = f"; see {log_path}" if log_path is not None else ""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise ServerStartError(f"the process exited with code {process.returncode}{where}")
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise ServerStartError(f"nothing listened on {host}:{port} within {timeout_s:.0f} s{where}")


class ServerProcess:
    """A child process serving on a loopback port (a context manager: started, then stopped).

    Args:
        args: The command after the Python interpreter, e.g. ``["-m", "tribal_memory", "serve"]``.
        log_path: Where stdout and stderr go.
        port: The port it will listen on (default: a free one); available
            before the start, so it can be part of ``args`` or ``env``.
        env: Extra environment variables for the child.
        health_path: Path polled until it answers 200; None: wait for the port only.
        startup_timeout_s: Longest wait for the process to answer, in seconds.
        append_log: Append to ``log_path`` instead of replacing it.

    Raises:
        ServerStartError: from :meth:`start`, when the process exited or did
            not answer in time (it is stopped then).
    """

    def __init__(
        self,
        args: Sequence[str],
        *,
        log_path: Path,
        port: int | None = None,
        env: Mapping[str, str] | None = None,
        health_path: str | None = "/health",
        startup_timeout_s: float = STARTUP_TIMEOUT_S,
        append_log: bool = False,
    ) -> None:
        self.port = port if port is not None else free_port()
        self.base_url = f"http://{LOOPBACK}:{self.port}"
        self.log_path = log_path
        self._args = list(args)
        self._env = dict(env or {})
        self._health_path = health_path
        self._timeout_s = startup_timeout_s
        self._append = append_log
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        """Process id of the running server."""
        assert self._process is not None, "the server is not running"
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        """The exit code once the process ended (negative: killed by that signal), else None."""
        return None if self._process is None else self._process.poll()

    def start(self) -> Self:
        """Start the process and wait until it answers (:meth:`launch`, then :meth:`wait_ready`).

        Raises:
            ServerStartError: it exited or did not answer within the startup timeout.
        """
        self.launch()
        return self.wait_ready()

    def launch(self) -> Self:
        """Start the process without waiting for it (start several, then wait for each)."""
        with self.log_path.open("ab" if self._append else "wb") as log:
            self._process = subprocess.Popen(
                [sys.executable, *self._args],
                env=child_env(self._env),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        return self

    def wait_ready(self) -> Self:
        """Wait until the launched process answers; it is stopped if it does not.

        Raises:
            ServerStartError: it exited or did not answer within the startup timeout.
        """
        assert self._process is not None, "launch() first"
        try:
            if self._health_path is None:
                wait_for_port(
                    self.port,
                    process=self._process,
                    timeout_s=self._timeout_s,
                    log_path=self.log_path,
                )
            else:
                wait_until_healthy(
                    self.base_url + self._health_path,
                    process=self._process,
                    timeout_s=self._timeout_s,
                    log_path=self.log_path,
                )
        except BaseException:
            self.stop()
            raise
        return self

    def wait(self) -> int:
        """Block until the process ends; returns its exit code."""
        assert self._process is not None, "the server was never started"
        return self._process.wait()

    def kill(self) -> None:
        """SIGKILL the process and reap it (a crash, for crash tests)."""
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGKILL)
            self._process.wait(timeout=30)

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout_s`` seconds; idempotent."""
        if self._process is None or self._process.poll() is not None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=10)

    def log_text(self) -> str:
        """What the process wrote so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def tribal_server(
    log_path: Path,
    *,
    data_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
    port: int | None = None,
    startup_timeout_s: float = STARTUP_TIMEOUT_S,
    append_log: bool = False,
    extra_args: Sequence[str] = (),
) -> ServerProcess:
    """A (not yet started) ``python -m tribal_memory serve`` on 127.0.0.1.

    Args:
        log_path: Where its output goes.
        data_dir: ``--data-dir`` (default: ``TRIBAL_DATA_DIR`` from ``env`` or the environment).
        env: Extra environment (``TRIBAL_*`` settings) for the server.
        port: Its port (default: a free one).
        startup_timeout_s: Longest wait for ``/health``, in seconds (the model loads first).
        append_log: Append to ``log_path`` (several runs over one log).
        extra_args: More ``serve`` options (e.g. ``--watch-openclaw``).
    """
    port = port if port is not None else free_port()
    args = ["-m", "tribal_memory", "serve", "--host", LOOPBACK, "--port", str(port), *extra_args]
    if data_dir is not None:
        args += ["--data-dir", str(data_dir)]
    return ServerProcess(
        args,
        log_path=log_path,
        port=port,
        env=env,
        startup_timeout_s=startup_timeout_s,
        append_log=append_log,
    )
