"""A throwaway S3-compatible server for the tests: moto's standalone server, loopback only.

moto (``moto[server]``, in the dev extra) serves the S3 API from memory in a
child process on a free 127.0.0.1 port; a bucket made here lives until the
server stops. :meth:`S3Server.env` gives the environment LanceDB reads to
reach it (its ``s3://`` URIs then point at this server): the endpoint, a
region, dummy credentials and ``AWS_ALLOW_HTTP`` for plain http.
"""

from __future__ import annotations

import importlib.util
import uuid
from pathlib import Path
from typing import Any

from tribal_memory.bench.server_process import LOOPBACK, ServerProcess, free_port

REGION = "us-east-1"
STARTUP_TIMEOUT_S = 60.0


class S3Server:
    """A running moto S3 server (start with :meth:`start`, stop with :meth:`stop`).

    Args:
        log_path: Where the server's request log goes.

    Raises:
        ServerStartError: from :meth:`start`, when the server exited or did not
            listen within 60 s.
    """

    def __init__(self, log_path: Path) -> None:
        port = free_port()
        self._process = ServerProcess(
            ["-m", "moto.server", "-H", LOOPBACK, "-p", str(port)],
            log_path=log_path,
            port=port,
            health_path=None,
            startup_timeout_s=STARTUP_TIMEOUT_S,
        )
        self.endpoint = self._process.base_url

    def start(self) -> S3Server:
        """Start the server and wait until it listens."""
        self._process.start()
        return self

    def stop(self) -> None:
        """Stop the server (its buckets go with it); idempotent."""
        self._process.stop()

    def env(self) -> dict[str, str]:
        """Environment variables under which LanceDB's ``s3://`` URIs reach this server."""
        return {
            "AWS_ENDPOINT": self.endpoint,
            "AWS_ALLOW_HTTP": "true",
            "AWS_REGION": REGION,
            "AWS_ACCESS_KEY_ID": "tribal-test",
            "AWS_SECRET_ACCESS_KEY": "tribal-test-secret",
        }

    def client(self) -> Any:  # boto3 ships no annotations
        """A boto3 S3 client for this server."""
        import boto3

        env = self.env()
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        )

    def create_bucket(self) -> str:
        """Create a new empty bucket; returns its name."""
        name = f"tribal-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def object_bytes(self, bucket: str, prefix: str = "") -> dict[str, int]:
        """Size in bytes of every object in ``bucket`` under ``prefix``, by key."""
        sizes: dict[str, int] = {}
        paginator = self.client().get_paginator("list_objects_v2")
        pages = paginator.paginate(Bucket=bucket, Prefix=prefix)
        for page in pages:
            for item in page.get("Contents", []):
                sizes[item["Key"]] = item["Size"]
        return sizes


def start_server(log_path: Path) -> tuple[S3Server | None, str]:
    """A started S3 server, or None and why moto cannot run here (a skip message).

    Raises:
        ServerStartError: moto is installed but its server failed to start (a
            real failure, not a reason to skip).
    """
    missing = [m for m in ("moto", "flask", "boto3") if importlib.util.find_spec(m) is None]
    if missing:
        return None, (
            f"S3-compatible test server unavailable: {', '.join(missing)} not installed "
            "(pip install 'moto[server]'; the dev extra has it)"
        )
    return S3Server(log_path).start(), ""
