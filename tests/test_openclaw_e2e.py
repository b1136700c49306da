"""End to end against the real OpenClaw (the release pinned in ``.ci/install-openclaw``).

A gateway runs on loopback with its home, state and config in a temp dir, first
with OpenClaw's own memory-core in the memory slot, then with the plugin in
``integrations/openclaw`` installed the way the README says (``openclaw plugins
install -l``), talking to a real ``tribal-memory serve`` on 127.0.0.1 that holds
the same small workspace. Checked: (a) every tool through the gateway's
``POST /tools/invoke``, its answer next to memory-core's for the same call;
(b) a full agent turn with a scripted OpenAI-compatible model
(:mod:`openclaw_stub`) that calls ``memory_search`` and then ``memory_feedback``
with the path it used, recorded by the server; (c) after three such turns the
same question is a cache hit on the server; (d) the model's request holds the
``<knowledge-graph>`` block of the matching memory, put there by the plugin's
start-of-turn hook. Also: the recall switched off in the plugin's config, and
the answers when the server is down. The gateway is started three times per
module (about 30 s each); everything started is stopped at the end of the
module.

Node 24 and OpenClaw come from ``TRIBAL_TEST_NODE`` and ``TRIBAL_TEST_OPENCLAW``
(``.ci/run`` sets them from ``.ci/install-openclaw``), else from that script's
default cache dir; without them the module is skipped and says how to install.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from openclaw_stub import FINAL_TEXT, StubModel, text_of

from tribal_memory.bench.server_process import ServerProcess, free_port, tribal_server

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
PLUGIN_DIR = REPO / "integrations" / "openclaw"
OPENCLAW_VERSION = "2026.9.6"
NODE_VERSION = "24.21.0"
AGENT = "main"
TOKEN = "e2e-gateway-token"
GATEWAY_START_TIMEOUT_S = 150.0
CLI_TIMEOUT_S = 120.0
TURN_TIMEOUT_S = 180.0
QUESTION = "Which database runs the billing service?"

WORKSPACE_FILES = {
    "MEMORY.md": (
        "# Team memory\n\n"
        "Deploys go out on Tuesdays after the stand-up.\n"
        "Alice prefers green tea over coffee.\n"
    ),
    "memory/2026-03-02.md": (
        "# 2026-03-02\n\n"
        "## Billing\n\n"
        "We chose PostgreSQL for the billing service because invoices need transactions.\n"
        "The billing database runs on db-billing-01 and is backed up nightly.\n\n"
        "## On-call\n\n"
        "Bob is on call this week; Carol takes over on Monday.\n"
    ),
    "memory/runbook.md": "# Runbook\n\n"
    + "".join(f"Step {n:03d}: check the queue depth of worker {n}.\n" for n in range(1, 151)),
}


def _find_openclaw() -> tuple[Path, Path] | None:
    """(node binary, openclaw.mjs) from the environment or the install script's cache."""
    node = os.environ.get("TRIBAL_TEST_NODE")
    openclaw = os.environ.get("TRIBAL_TEST_OPENCLAW")
    if node and openclaw:
        return Path(node), Path(openclaw)
    cache = Path(
        os.environ.get("TRIBAL_OPENCLAW_CACHE")
        or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        / "tribal-memory"
        / "openclaw"
    )
    openclaw_path = cache / f"openclaw-{OPENCLAW_VERSION}" / "node_modules/openclaw/openclaw.mjs"
    for node_path in (cache / f"node-{NODE_VERSION}" / "node_modules").glob("node-*/bin/node"):
        if (cache / f"openclaw-{OPENCLAW_VERSION}" / ".installed").exists():
            return node_path, openclaw_path
    return None


@dataclass
class OpenClaw:
    """The pinned OpenClaw CLI with its home, state and config in one temp dir."""

    node: Path
    script: Path
    home: Path

    @property
    def config_path(self) -> Path:
        """``OPENCLAW_CONFIG_PATH``."""
        return self.home / "openclaw.json"

    def env(self) -> dict[str, str]:
        """The environment of every OpenClaw process: nothing of the user's setup."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENCLAW_")}
        env.update(
            HOME=str(self.home),
            OPENCLAW_STATE_DIR=str(self.home / "state"),
            OPENCLAW_CONFIG_PATH=str(self.config_path),
            PATH=f"{self.node.parent}{os.pathsep}{env.get('PATH', '')}",
            NO_COLOR="1",
        )
        return env

    def run(self, *args: str, timeout_s: float = CLI_TIMEOUT_S) -> str:
        """Run ``openclaw ARGS``; its stdout.

        Raises:
            AssertionError: it failed (its output in the message).
        """
        done = subprocess.run(
            [str(self.node), str(self.script), *args],
            env=self.env(),
            cwd=self.home,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        assert done.returncode == 0, f"openclaw {' '.join(args)}: {done.stdout}\n{done.stderr}"
        return done.stdout


class Gateway:
    """``openclaw gateway run`` in its own process group on a loopback port."""

    def __init__(self, openclaw: OpenClaw, port: int, log_path: Path) -> None:
        self.openclaw = openclaw
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> Gateway:
        """Start it and wait for ``/health``.

        Raises:
            AssertionError: it exited or did not answer within the timeout.
        """
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                [str(self.openclaw.node), str(self.openclaw.script), "gateway", "run"],
                env=self.openclaw.env(),
                cwd=self.openclaw.home,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + GATEWAY_START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                break
            try:
                if httpx.get(f"{self.url}/health", timeout=2.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        log_text = self.log_path.read_text(errors="replace")[-4000:]
        self.stop()
        raise AssertionError(f"the OpenClaw gateway did not start:\n{log_text}")

    def stop(self) -> None:
        """SIGTERM to its process group, SIGKILL after 15 s; idempotent."""
        process, self._process = self._process, None
        if process is None:
            return
        for sig, wait_s in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                break
            try:
                process.wait(timeout=wait_s)
                # Children of the gateway (its spawn broker) share the group.
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                break
            except subprocess.TimeoutExpired:
                continue
            break

    def invoke(self, tool: str, args: dict[str, Any]) -> tuple[int, Any]:
        """``POST /tools/invoke``: (HTTP status, the tool's answer or the error body)."""
        response = httpx.post(
            f"{self.url}/tools/invoke",
            json={"tool": tool, "args": args, "sessionKey": "main"},
            headers={"authorization": f"Bearer {TOKEN}"},
            timeout=120.0,
        )
        body = response.json()
        if response.status_code == 200 and body.get("ok"):
            return 200, body["result"]["details"]
        return response.status_code, body


@dataclass
class Setup:
    """What the module's tests share."""

    openclaw: OpenClaw
    gateway: Gateway
    server: ServerProcess
    stub: StubModel
    memory_core: dict[str, Any]
    status: dict[str, Any]


def _write_workspace(root: Path) -> Path:
    workspace = root / "workspace"
    for name, text in WORKSPACE_FILES.items():
        path = workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return workspace


def _base_config(workspace: Path, gateway_port: int, stub: StubModel, logs: Path) -> dict[str, Any]:
    """An OpenClaw config: loopback gateway, the stub model, keyword-only memory-core."""
    model = {
        "id": "stub-model",
        "name": "Stub",
        "reasoning": False,
        "input": ["text"],
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
        "contextWindow": 64000,
        "maxTokens": 1000,
    }
    return {
        "gateway": {
            "mode": "local",
            "port": gateway_port,
            "bind": "loopback",
            "auth": {"mode": "token", "token": TOKEN},
        },
        "logging": {"file": str(logs / "openclaw.log")},
        "agents": {
            "defaults": {
                "workspace": str(workspace),
                "model": {"primary": "stub/stub-model"},
                # No turns of the gateway's own: every model request is a test's.
                "heartbeat": {"every": "0m"},
            }
        },
        "models": {
            "mode": "merge",
            "providers": {
                "stub": {
                    "baseUrl": stub.base_url,
                    "apiKey": "stub",
                    "api": "openai-completions",
                    "models": [model],
                }
            },
        },
        # memory-core needs no embedding provider then (and no network).
        "memory": {"search": {"provider": "none"}},
        "tools": {"toolSearch": False},
    }


# Tool calls made through both memory slots: (name, arguments).
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("memory_search", {"query": QUESTION}),
    ("memory_search", {"query": QUESTION, "corpus": "memory", "maxResults": 3}),
    ("memory_search", {"query": QUESTION, "corpus": "wiki"}),
    ("memory_search", {"query": QUESTION, "corpus": "sessions"}),
    ("memory_search", {"query": QUESTION, "minScore": 5}),
    ("memory_get", {"path": "MEMORY.md"}),
    ("memory_get", {"path": "memory/2026-03-02.md"}),
    ("memory_get", {"path": "memory/2026-03-02.md", "from": 5, "lines": 2}),
    ("memory_get", {"path": "./memory//2026-03-02.md"}),
    ("memory_get", {"path": "memory/runbook.md"}),
    ("memory_get", {"path": "memory/runbook.md", "from": 121}),
    ("memory_get", {"path": "memory/runbook.md", "from": 40, "lines": 3}),
    ("memory_get", {"path": "memory/2026-02-30.md"}),
    ("memory_get", {"path": "../outside.md"}),
]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    found = _find_openclaw()
    if found is None:
        reason = os.environ.get("TRIBAL_TEST_OPENCLAW_UNAVAILABLE") or (
            f"Node {NODE_VERSION} and OpenClaw {OPENCLAW_VERSION} are not installed; "
            "run .ci/install-openclaw (needs npm) or .ci/run"
        )
        pytest.skip(reason)
    node, script = found
    root = tmp_path_factory.mktemp("openclaw-e2e")
    home = root / "home"
    (home / "state").mkdir(parents=True)
    logs = root / "logs"
    logs.mkdir()
    openclaw = OpenClaw(node, script, home)
    workspace = _write_workspace(root)
    data_dir = root / "tribal-data"
    ingest = subprocess.run(
        [sys.executable, "-m", "tribal_memory", "ingest", str(workspace), "--owner", AGENT,
         "--data-dir", str(data_dir), "--json"],
        capture_output=True, text=True, timeout=300, check=False, cwd=root,
    )  # fmt: skip
    assert ingest.returncode == 0, ingest.stderr
    paths = {json.loads(line).get("path") for line in ingest.stdout.splitlines()}
    assert set(WORKSPACE_FILES) <= paths, ingest.stdout  # relative to the workspace

    with StubModel() as stub, tribal_server(logs / "tribal.log", data_dir=data_dir) as server:
        gateway = Gateway(openclaw, free_port(), logs / "gateway.log")
        config = _base_config(workspace, gateway.port, stub, logs)
        openclaw.config_path.write_text(json.dumps(config, indent=2), encoding="utf-8")
        try:
            # memory-core in the slot (OpenClaw's default): its answers to every call.
            gateway.start()
            memory_core = {json.dumps(call): gateway.invoke(*call) for call in CALLS}
            gateway.stop()
            # The plugin as the README installs it.
            openclaw.run(
                "plugins", "install", "-l", str(PLUGIN_DIR), "--force", "--accept-capabilities"
            )
            openclaw.run(
                "config", "set", "plugins.entries.tribal-memory.config",
                json.dumps({"baseUrl": server.base_url}), "--strict-json",
            )  # fmt: skip
            openclaw.run(
                "config", "set", "plugins.entries.tribal-memory.hooks",
                json.dumps({"allowConversationAccess": True}), "--strict-json",
            )  # fmt: skip
            openclaw.run("config", "validate")
            # OpenClaw 2026.9.6 reports the memory backend only while the gateway is down
            # ("Local plugin inspection is not collected in online status").
            status = json.loads(openclaw.run("status", "--json", "--all", "--timeout", "2000"))
            gateway.start()
            yield Setup(openclaw, gateway, server, stub, memory_core, status)
        finally:
            gateway.stop()


def _citation(result: dict[str, Any]) -> str:
    start, end = result["startLine"], result["endLine"]
    return f"{result['path']}#L{start}" if start == end else f"{result['path']}#L{start}-L{end}"


READ_KEYS = {"path", "startLine", "endLine", "score", "snippet", "source", "corpus", "citation"}


def test_installed_plugin_holds_the_memory_slot(setup: Setup) -> None:
    config = json.loads(setup.openclaw.config_path.read_text(encoding="utf-8"))
    assert config["plugins"]["slots"]["memory"] == "tribal-memory"
    assert config["plugins"]["entries"]["tribal-memory"]["enabled"] is True
    inspected = setup.openclaw.run("plugins", "inspect", "tribal-memory", "--runtime")
    assert "Status: loaded" in inspected and "before_prompt_build" in inspected
    assert "memory_search, memory_get, memory_feedback, memory_capture" in inspected
    # `openclaw status --all` asked the plugin's runtime, which asked the server.
    memory = setup.status["memory"]
    assert (memory["provider"], memory["agentId"]) == ("tribal-memory", AGENT)
    assert memory["files"] == len(WORKSPACE_FILES) and memory["chunks"] >= len(WORKSPACE_FILES)
    assert memory["custom"]["baseUrl"] == setup.server.base_url


@pytest.mark.parametrize("call", CALLS, ids=lambda call: json.dumps(call[1], sort_keys=True))
def test_tool_answers_match_memory_core(setup: Setup, call: tuple[str, dict[str, Any]]) -> None:
    name, args = call
    core_status, core = setup.memory_core[json.dumps(call)]
    status, ours = setup.gateway.invoke(name, args)
    assert status == core_status == 200, (ours, core)
    if name == "memory_get":
        if args.get("path", "").startswith(".."):
            assert ours["status"] == core["status"] == "error"
            assert ours["code"] == core["code"] == "MEMORY_PATH_NOT_ALLOWED"
            assert ours["text"] == core["text"] == ""
        else:
            # Word for word: text (headings and continuation notice included), window, status.
            assert ours == core
        return
    if args.get("corpus") == "wiki":
        assert ours["results"] == core["results"] == []
        not_registered = [{"corpus": "wiki", "outcome": "not-registered"}]
        assert ours["corpora"] == core["corpora"] == not_registered
        assert ours["warning"] and core["warning"]
        return
    if args.get("corpus") == "sessions":
        for answer in (ours, core):
            assert answer["results"] == [] and answer["disabled"] is answer["unavailable"] is True
            for key in ("error", "warning", "action"):
                assert isinstance(answer[key], str) and answer[key]
        return
    assert ours["citations"] == core["citations"] == "auto"
    assert ours["provider"] == "tribal-memory" and isinstance(ours["retrievalId"], str)
    if args.get("minScore", 0) > 1:
        return  # memory-core keeps keyword matches under any minScore; we drop them
    assert ours["results"] and core["results"]
    assert len(ours["results"]) <= args.get("maxResults", 6)
    # The same file answers first; each result reads as memory-core's does.
    assert ours["results"][0]["path"] == core["results"][0]["path"] == "memory/2026-03-02.md"
    for result in ours["results"] + core["results"]:
        assert set(result) >= READ_KEYS
        assert result["citation"] == _citation(result)
        assert result["snippet"].endswith(f"\n\nSource: {result['citation']}")
        assert result["source"] == result["corpus"] == "memory"
    for result in ours["results"]:
        assert 0.0 <= result["textScore"] <= 1.0 and 0.0 <= result["vectorScore"] <= 1.0
        got_status, got = setup.gateway.invoke(
            "memory_get",
            {"path": result["path"], "from": result["startLine"],
             "lines": result["endLine"] - result["startLine"] + 1},
        )  # fmt: skip
        assert got_status == 200 and got["status"] == "ok"
        body = result["snippet"].rsplit("\n\nSource: ", 1)[0]
        assert body.strip() in got["text"]


def _retrieval_stats(server: ServerProcess) -> dict[str, Any]:
    response = httpx.get(f"{server.base_url}/v1/stats/retrieval", params={"owner": AGENT})
    response.raise_for_status()
    overall: dict[str, Any] = response.json()["overall"]
    return overall


def _turn(setup: Setup, number: int) -> list[dict[str, Any]]:
    """One agent turn in a session of its own; the stub model's requests during it."""
    before = len(setup.stub.requests)
    out = setup.openclaw.run(
        "agent", "--agent", AGENT, "--session-key", f"agent:{AGENT}:e2e-{number}",
        "-m", QUESTION, "--json", "--timeout", "150",
        timeout_s=TURN_TIMEOUT_S,
    )  # fmt: skip
    reply = json.loads(out[out.index("{") :])
    assert reply["status"] == "ok", out
    assert [p["text"] for p in reply["result"]["payloads"]] == [FINAL_TEXT]
    # Only this turn's requests: the gateway may run other agent turns of its
    # own (a heartbeat, say) against the same model meanwhile.
    return [r for r in setup.stub.requests[before:] if _asks(r, QUESTION)]


def _asks(request: dict[str, Any], question: str) -> bool:
    """Whether a model request's user messages hold ``question``."""
    return any(
        question in text_of(m.get("content"))
        for m in request.get("messages") or []
        if m.get("role") == "user"
    )


def _outline(requests: list[dict[str, Any]]) -> str:
    """Each model request as its messages' roles and tool calls, for a failure message."""
    lines = []
    for request in requests:
        parts = []
        for m in request.get("messages") or []:
            calls = [c["function"]["name"] for c in m.get("tool_calls") or []]
            text = json.dumps(m.get("content"))[:60] if m.get("role") != "system" else ""
            parts.append(f"{m.get('role')}{calls or ''} {text}")
        lines.append(" | ".join(parts))
    return "\n".join(lines)


def _tool_results(request: dict[str, Any]) -> dict[str, Any]:
    """The tool answers in a model request, by tool name."""
    names = {
        call["id"]: call["function"]["name"]
        for message in request["messages"]
        for call in message.get("tool_calls") or []
    }
    return {
        names[m["tool_call_id"]]: json.loads(m["content"])
        for m in request["messages"]
        if m.get("role") == "tool"
    }


def test_agent_turns_feed_back_and_learn(setup: Setup) -> None:
    started = _retrieval_stats(setup.server)
    seen: list[dict[str, Any]] = []
    for number in (1, 2, 3):
        requests = _turn(setup, number)
        assert len(requests) == 3, _outline(requests)  # search, feedback, reply
        first, last = requests[0], requests[-1]
        # (d) The start-of-turn hook put the matching memory's block before the question.
        user = "\n".join(str(m["content"]) for m in first["messages"] if m.get("role") == "user")
        block = re.search(r"<knowledge-graph>.*?</knowledge-graph>", user, re.S)
        assert block is not None, user
        assert "memory/2026-03-02.md" in block.group(0) and "Billing" in block.group(0)
        assert user.index("</knowledge-graph>") < user.index(QUESTION)
        system = "\n".join(
            str(m["content"]) for m in first["messages"] if m.get("role") in ("system", "developer")
        )
        assert "## Memory Recall" in system and "memory_feedback" in system
        # (b) memory_search, then memory_feedback naming the path it used, recorded.
        answers = _tool_results(last)
        searched, fed = answers["memory_search"], answers["memory_feedback"]
        assert searched["results"][0]["path"] == "memory/2026-03-02.md"
        assert fed["retrievalId"] == searched["retrievalId"]
        assert fed["usedPaths"] == ["memory/2026-03-02.md"] and fed["usedIds"]
        assert fed["duplicate"] is False
        seen.append(searched)
        stats = _retrieval_stats(setup.server)
        assert stats["with_feedback"] == started["with_feedback"] + number
        assert stats["cache_hits"] == started["cache_hits"]  # not proven yet
    # (c) Three successes: the fourth time the question is answered from the cache.
    _turn(setup, 4)
    assert _retrieval_stats(setup.server)["cache_hits"] > started["cache_hits"]
    status, again = setup.gateway.invoke("memory_search", {"query": QUESTION})
    assert status == 200 and again["results"][0]["path"] == "memory/2026-03-02.md"
    assert again["results"][0]["score"] >= seen[0]["results"][0]["score"]


def _user_text(request: dict[str, Any]) -> str:
    return "\n".join(str(m["content"]) for m in request["messages"] if m.get("role") == "user")


def test_auto_recall_switched_off(setup: Setup) -> None:
    settings = {"baseUrl": setup.server.base_url, "autoRecall": {"enabled": False}}
    setup.openclaw.run(
        "config", "set", "plugins.entries.tribal-memory.config", json.dumps(settings),
        "--strict-json",
    )  # fmt: skip
    setup.gateway.stop()
    setup.gateway.start()
    before = _retrieval_stats(setup.server)["retrievals"]
    requests = _turn(setup, 5)
    assert QUESTION in _user_text(requests[0]) and "<knowledge-graph>" not in _user_text(
        requests[0]
    )
    # The tools still answer: one retrieval (the tool's search), no /v1/context search.
    assert _tool_results(requests[-1])["memory_feedback"]["usedPaths"] == ["memory/2026-03-02.md"]
    assert _retrieval_stats(setup.server)["retrievals"] == before + 1


def test_memory_capture_through_the_gateway_stores_a_fact(setup: Setup) -> None:
    fact = "The release train leaves on Thursdays at noon."
    status, stored = setup.gateway.invoke("memory_capture", {"content": fact, "tags": ["release"]})
    assert status == 200 and stored["status"] == "created", stored
    status, again = setup.gateway.invoke("memory_capture", {"content": fact})
    assert status == 200 and (again["status"], again["memoryId"]) == ("exists", stored["memoryId"])
    status, got = setup.gateway.invoke("memory_get", {"path": stored["path"]})
    assert status == 200 and fact in got["text"], got


def test_server_down_answers_unavailable(setup: Setup) -> None:
    """Last in the module: it stops the tribal-memory server."""
    setup.server.stop()
    status, search = setup.gateway.invoke("memory_search", {"query": QUESTION})
    assert status == 200
    _, core_unavailable = setup.memory_core[json.dumps(CALLS[3])]
    expected = {"results", "disabled", "unavailable", "error", "warning", "action"}
    assert expected <= set(search) and expected <= set(core_unavailable)
    assert search["results"] == [] and search["disabled"] is search["unavailable"] is True
    assert "unreachable" in search["error"] and search["action"]
    status, read = setup.gateway.invoke("memory_get", {"path": "MEMORY.md"})
    assert status == 200
    assert read["status"] == "error" and read["text"] == "" and read["error"]
