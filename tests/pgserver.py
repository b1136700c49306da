"""A throwaway PostgreSQL server for the tests: initdb + postgres in a temp dir, loopback only.

The server is this machine's PostgreSQL (``/usr/lib/postgresql/*/bin``, or
``initdb`` and ``postgres`` on the PATH) run as a child process on a free
127.0.0.1 port, with its socket in the same temp dir, durability switched off
(``fsync=off``: the data is thrown away). PostgreSQL refuses to run as root:
as root it runs as the ``postgres`` user (or ``nobody``). Nothing outside the
temp dir is touched; :meth:`PostgresServer.stop` kills the server and removes it.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from tribal_memory.bench.server_process import free_port

STARTUP_TIMEOUT_S = 60.0
_USER = "tribal"


def find_binaries() -> tuple[Path | None, str]:
    """The directory holding ``initdb`` and ``postgres``, or None and why not.

    ``TRIBAL_TEST_PG_BIN`` names the directory (only it is tried); else the
    newest ``/usr/lib/postgresql/*/bin``, then ``initdb`` on the PATH.
    """
    chosen = os.environ.get("TRIBAL_TEST_PG_BIN")
    if chosen:
        candidates = [chosen]
        where = chosen
    else:
        candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
        on_path = shutil.which("initdb")
        if on_path:
            candidates.append(str(Path(on_path).parent))
        where = "/usr/lib/postgresql/*/bin or on PATH"
    for directory in candidates:
        if (Path(directory) / "initdb").is_file() and (Path(directory) / "postgres").is_file():
            return Path(directory), ""
    return None, (
        f"PostgreSQL server binaries (initdb, postgres) not found in {where}; "
        "install the postgresql package to run these tests"
    )


def _run_as() -> tuple[dict[str, Any], str]:
    """``subprocess`` arguments to drop root, or ({}, why not) when that is impossible."""
    if os.geteuid() != 0:
        return {}, ""
    for name in ("postgres", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}, ""
    return {}, "running as root and no 'postgres' or 'nobody' user to run PostgreSQL as"


class PostgresServer:
    """A running PostgreSQL server; ``url(dbname)`` gives SQLAlchemy URLs for its databases.

    Raises:
        RuntimeError: from :meth:`start`, when initdb fails or the server does
            not accept connections within 60 s (the message holds its log).
    """

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="tribal-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.password = "pg-secret-pw"
        self._as, _ = _run_as()
        self._process: subprocess.Popen[bytes] | None = None

    def url(self, dbname: str = "postgres", *, driver: str = "postgresql+psycopg") -> str:
        """A URL for database ``dbname`` (TCP on 127.0.0.1, password authentication)."""
        return f"{driver}://{_USER}:{self.password}@127.0.0.1:{self.port}/{dbname}"

    def start(self) -> PostgresServer:
        """initdb, then start the server and wait until it accepts connections."""
        if "user" in self._as:
            os.chown(self.root, self._as["user"], self._as["group"])
        pwfile = self.root / "pw"
        pwfile.write_text(self.password + "\n")
        if "user" in self._as:
            os.chown(pwfile, self._as["user"], self._as["group"])
        init = subprocess.run(
            [
                str(self.bin_dir / "initdb"),
                "-D",
                str(self.data),
                "-U",
                _USER,
                "--pwfile",
                str(pwfile),
                "--auth",
                "scram-sha-256",
                "--encoding",
                "UTF8",
                "--no-sync",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=self.root,
            **self._as,
        )
        if init.returncode != 0:
            raise RuntimeError(f"initdb failed:\n{init.stdout}\n{init.stderr}")
        log = (self.root / "server.log").open("wb")
        self._process = subprocess.Popen(
            [
                str(self.bin_dir / "postgres"),
                "-D",
                str(self.data),
                "-p",
                str(self.port),
                "-k",
                str(self.root),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "max_connections=300",
                "-c",
                "shared_buffers=64MB",
                "-c",
                "timezone=UTC",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.root,
            **self._as,
        )
        log.close()
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        import psycopg

        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise RuntimeError(f"postgres exited:\n{self.log()}")
            try:
                url = self.url("postgres", driver="postgresql")
                psycopg.connect(url, connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                time.sleep(0.2)
        raise RuntimeError(f"postgres not ready after {STARTUP_TIMEOUT_S} s:\n{self.log()}")

    def log(self) -> str:
        """The server's log so far."""
        path = self.root / "server.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def execute(self, sql: str) -> None:
        """Run one statement outside a transaction in the ``postgres`` database."""
        import psycopg

        with psycopg.connect(self.url("postgres", driver="postgresql"), autocommit=True) as conn:
            conn.execute(sql)  # type: ignore[arg-type]  # test-only DDL with known names

    def create_database(self, name: str, *, template: str | None = None) -> str:
        """Create database ``name`` (from ``template``, if given); returns its URL."""
        suffix = f" TEMPLATE {template}" if template else ""
        self.execute(f"CREATE DATABASE {name}{suffix}")
        return self.url(name)

    def drop_database(self, name: str) -> None:
        """Drop database ``name``, closing any connection still open to it."""
        self.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def stop(self) -> None:
        """Stop the server (fast shutdown, then kill) and remove its directory; idempotent."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)  # fast shutdown (SIGTERM waits for clients)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        shutil.rmtree(self.root, ignore_errors=True)


def start_server() -> tuple[PostgresServer | None, str]:
    """A started server, or None and why PostgreSQL cannot run here (a skip message).

    Raises:
        RuntimeError: the binaries are there but the server failed to start
            (a real failure, with its log; not a reason to skip).
    """
    bin_dir, why = find_binaries()
    if bin_dir is None:
        return None, why
    _, why = _run_as()
    if why:
        return None, why
    server = PostgresServer(bin_dir)
    try:
        return server.start(), ""
    except BaseException:
        server.stop()
        raise
