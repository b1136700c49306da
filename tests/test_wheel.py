"""The built wheel works without a checkout: ``tribal-memory serve`` from a fresh venv.

The wheel is built with ``pip wheel`` (hatchling, fetched by pip's build
isolation), installed with ``--no-deps`` into a new venv in a temp dir, and run
from a temp working directory with no ``PYTHONPATH``: the package, its
migrations, model files and shipped suites must all come out of the wheel.
Its third-party dependencies are taken from this environment through a
``.pth`` line (installing lancedb, onnxruntime and the rest again would take
minutes); with ``TRIBAL_TEST_WHEEL_DEPS=index`` they are installed from the
package index instead, as on a user's machine. Skipped, with the reason, when
the wheel cannot be built here (no build backend reachable).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tribal_memory import MemoryInput, SearchFilters, __version__
from tribal_memory.bench.server_process import (
    LOOPBACK,
    ServerStartError,
    free_port,
    wait_until_healthy,
)
from tribal_memory.client import TribalMemoryClient

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
STARTUP_TIMEOUT_S = 120.0


def _run(args: list[str], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = 600):
    return subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def _clean_env(**extra: str) -> dict[str, str]:
    """This environment without PYTHONPATH, virtualenv markers or TRIBAL_* settings."""
    dropped = ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
    env = {k: v for k, v in os.environ.items() if k not in dropped and not k.startswith("TRIBAL_")}
    return {**env, **extra}


def _check_contents(wheel: Path) -> None:
    """Every file git tracks under tribal_memory/ (code, templates, static assets) is in the wheel,
    and so are the migrations and shipped suites from outside it."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert "tribal_memory/_migrations/env.py" in names
    assert "tribal_memory/_datasets/team-facts.json" in names
    tracked = _run(["git", "ls-files", "tribal_memory"], cwd=ROOT) if shutil.which("git") else None
    if tracked is None or tracked.returncode != 0:
        return  # not a git checkout: the runtime checks below still hold
    missing = [name for name in tracked.stdout.split() if name not in names]
    assert missing == [], f"tracked package files missing from the wheel: {missing[:10]}"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv (outside the checkout) with the wheel built from this tree installed."""
    root = tmp_path_factory.mktemp("wheel")
    dist = root / "dist"
    built = _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)],
        cwd=root,
    )
    wheels = list(dist.glob("tribal_memory-*.whl"))
    if built.returncode != 0 or not wheels:
        pytest.skip(f"could not build the wheel here (pip wheel: {built.stderr.strip()[-300:]})")
    _check_contents(wheels[0])
    venv = root / "venv"
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=root)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    from_index = os.environ.get("TRIBAL_TEST_WHEEL_DEPS") == "index"
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
    if not from_index:
        install.append("--no-deps")
        purelib = _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            cwd=root,
        ).stdout.strip()
        # This environment's packages, after the venv's own (a plain path line: the
        # editable install's own .pth file there is not processed).
        Path(purelib, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    done = _run([*install, str(wheels[0])], cwd=root, timeout=900)
    assert done.returncode == 0, done.stderr
    return venv


def test_the_wheel_carries_the_package_and_its_data(installed: Path, tmp_path: Path) -> None:
    python = str(installed / "bin" / "python")
    code = (
        "import tribal_memory, tribal_memory.base.db as db\n"
        "from tribal_memory.bench.suite import available_suites\n"
        "print(tribal_memory.__file__)\n"
        "print(db.__file__)\n"
        "print(','.join(available_suites()))\n"
    )
    done = _run([python, "-c", code], cwd=tmp_path, env=_clean_env())
    assert done.returncode == 0, done.stderr
    package, _, suites = done.stdout.strip().splitlines()
    assert Path(package).is_relative_to(installed), package
    assert "team-facts" in suites.split(",")
    package_dir = Path(package).parent
    assert (package_dir / "_migrations" / "env.py").is_file()
    assert (package_dir / "_model" / "tokenizer.json").is_file()
    version = _run([str(installed / "bin" / "tribal-memory"), "--version"], cwd=tmp_path)
    assert version.stdout.strip() == f"tribal-memory {__version__}", version.stderr


@pytest.fixture
def served(installed: Path, tmp_path: Path) -> Iterator[str]:
    """``tribal-memory serve`` from the venv, in a temp working dir; stopped afterwards."""
    port = free_port()
    log = tmp_path / "server.log"
    env = _clean_env(TRIBAL_DATA_DIR=str(tmp_path / "data"))
    args = [str(installed / "bin" / "tribal-memory"), "serve", "--host", LOOPBACK]
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*args, "--port", str(port)], cwd=tmp_path, env=env, stdout=out, stderr=out
        )
    url = f"http://{LOOPBACK}:{port}"
    try:
        try:
            wait_until_healthy(f"{url}/health", process=process, timeout_s=STARTUP_TIMEOUT_S)
        except ServerStartError as exc:
            pytest.fail(f"{exc.detail}; the installed server said:\n{log.read_text()}")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert "Traceback" not in log.read_text()


def test_installed_server_captures_and_searches_over_http(served: str) -> None:
    with TribalMemoryClient(served, strict=True) as client:
        assert client.health()["version"] == __version__
        owner = "wheel-user"
        for fact in (
            "The office printer is on the third floor",
            "Payroll runs on the 25th of each month",
            "The wifi password rotates every Monday",
        ):
            assert client.capture(MemoryInput(fact, owner=owner)).status == "created"
        hits = client.search("when is payroll?", filters=SearchFilters(owner=owner)).hits
        assert hits[0].memory.content == "Payroll runs on the 25th of each month"
