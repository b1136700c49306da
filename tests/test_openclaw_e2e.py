"""End to end against the real OpenClaw (the release pinned in ``.ci/install-openclaw``).

A gateway runs on loopback with its home, state and config in a temp dir, first
with OpenClaw's own memory-core in the memory slot, then with the plugin in
``integrations/openclaw`` set up the way docs/integrations/openclaw.md says (``tribal-memory
openclaw setup``, after a ``--dry-run`` that must change nothing), talking to a
real ``tribal-memory serve --watch-openclaw`` on 127.0.0.1 (it finds the
agent's workspace through ``openclaw config`` and keeps its memory files
indexed) that requires API keys: the plugin
holds the agent's own (non-admin) key, so ``openclaw status`` reads the
owner-scoped stats. The workspace has an ``AGENTS.md`` that memory-core
neither searches nor reads, and neither does the plugin. Checked: (a) every
tool through the gateway's ``POST /tools/invoke``, its answer next to
memory-core's for the same call; (b) full agent turns with a scripted
OpenAI-compatible model (:mod:`openclaw_stub`) under OpenClaw's default Tool
Search (the tools called through ``tool_call``): ``memory_search``, then
``memory_feedback`` with the path it used, recorded by the server; (c) after
three such turns the same question is a cache hit; (d) the model's request
holds the ``<knowledge-graph>`` block put there by the start-of-turn hook;
(e) a conversation captured by the ``agent_end`` hook (session id, turn order,
no tool output) and recalled in a later session, and searched with ``scope``
``session`` (this session's turns only) and ``long-term`` (all but them);
(f) 409, 403 and 401 answers reaching the model with the server's message;
(g) a note written to the workspace's ``memory/`` while everything runs is
found by the next search, a bootstrap file written beside it never is. Also: the recall switched off
with Tool Search off (the tools offered directly), and the answers when the
server is down. The gateway is started three times per module (about 30 s
each); everything started is stopped at the end of the module.

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
from openclaw_stub import FINAL_TEXT, STATEMENT_TEXT, StubModel, text_of, tool_answers

from tribal_memory.bench.server_process import ServerProcess, free_port, tribal_server

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
PLUGIN_DIR = REPO / "integrations" / "openclaw"
OPENCLAW_VERSION = "2026.9.6"
NODE_VERSION = "24.21.0"
AGENT = "main"
OTHER = "other"
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
    # An OpenClaw bootstrap file: memory-core neither searches nor reads it.
    "AGENTS.md": (
        "# Agents\n\nWhen asked which database runs the billing service, check memory first.\n"
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

    def invoke(
        self, tool: str, args: dict[str, Any], session_key: str = f"agent:{AGENT}:main"
    ) -> tuple[int, Any]:
        """``POST /tools/invoke``: (HTTP status, the tool's answer or the error body)."""
        response = httpx.post(
            f"{self.url}/tools/invoke",
            json={"tool": tool, "args": args, "sessionKey": session_key},
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
    keys: dict[str, dict[str, Any]]
    data_dir: Path
    setup_runs: dict[str, dict[str, Any]]
    workspace: Path
    server_log: Path

    @property
    def admin(self) -> dict[str, str]:
        """Headers of the admin key (the server runs with authentication on)."""
        return {"authorization": f"Bearer {self.keys['admin']['key']}"}


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
            },
            # OTHER has no key of its own: the plugin's key (for AGENT) is refused for it.
            "list": [{"id": AGENT, "default": True}, {"id": OTHER}],
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
        # tools.toolSearch unset: OpenClaw's default Tool Search, where the memory
        # tools are deferred and the model calls them through tool_call.
    }


# Tool calls made through both memory slots: (name, arguments).
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("memory_search", {"query": QUESTION}),
    ("memory_search", {"query": QUESTION, "corpus": "memory", "maxResults": 3}),
    ("memory_search", {"query": QUESTION, "corpus": "wiki"}),
    ("memory_search", {"query": QUESTION, "corpus": "sessions"}),
    ("memory_search", {"query": QUESTION, "minScore": 5}),
    ("memory_search", {"query": QUESTION, "corpus": "all"}),
    ("memory_get", {"path": "AGENTS.md"}),
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
    keys = {"admin": _create_key(data_dir, "ops", admin=True)}
    auth_on = {"TRIBAL_AUTH": "required"}
    port = free_port()
    with StubModel() as stub:
        gateway = Gateway(openclaw, free_port(), logs / "gateway.log")
        # The OpenClaw config onboarding would write, with the stub model.
        config = _base_config(workspace, gateway.port, stub, logs)
        openclaw.config_path.write_text(json.dumps(config, indent=2), encoding="utf-8")
        try:
            # memory-core in the slot (OpenClaw's default): its answers to every call.
            gateway.start()
            memory_core = {json.dumps(call): gateway.invoke(*call) for call in CALLS}
            gateway.stop()
            # The plugin as the docs set it up: one command.
            planned = _setup_command(openclaw, data_dir, port, "--dry-run")
            assert json.loads(openclaw.config_path.read_text(encoding="utf-8")) == config
            done = _setup_command(openclaw, data_dir, port)
            written = json.loads(openclaw.config_path.read_text(encoding="utf-8"))
            key = written["plugins"]["entries"]["tribal-memory"]["config"]["apiKey"]
            keys["main"] = {"key": key, "key_id": done["key_id"]}
            # The server as the README starts it: serving and watching the workspace,
            # which it finds in OpenClaw's config as the setup did.
            watch = ["--watch-openclaw", "--openclaw", f"{openclaw.node} {openclaw.script}"]
            with tribal_server(
                logs / "tribal.log", data_dir=data_dir, env={**openclaw.env(), **auth_on},
                port=port, extra_args=watch,
            ) as server:  # fmt: skip
                # OpenClaw 2026.9.6 reports the memory backend only while the gateway is
                # down ("Local plugin inspection is not collected in online status").
                status = json.loads(openclaw.run("status", "--json", "--all", "--timeout", "2000"))
                gateway.start()
                yield Setup(
                    openclaw, gateway, server, stub, memory_core, status, keys, data_dir,
                    {"planned": planned, "done": done}, workspace, logs / "tribal.log",
                )  # fmt: skip
        finally:
            gateway.stop()


def _setup_command(openclaw: OpenClaw, data_dir: Path, port: int, *args: str) -> dict[str, Any]:
    """``tribal-memory openclaw setup`` for OPENCLAW's home, a server on ``port`` with keys."""
    done = subprocess.run(
        [sys.executable, "-m", "tribal_memory", "openclaw", "setup",
         "--openclaw", f"{openclaw.node} {openclaw.script}", "--node", str(openclaw.node),
         "--server-url", f"http://127.0.0.1:{port}", "--data-dir", str(data_dir), "--json", *args],
        env={**openclaw.env(), "TRIBAL_AUTH": "required"}, cwd=openclaw.home,
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return summary


def _tribal(*args: str, data_dir: Path) -> str:
    """``tribal-memory ARGS --data-dir DATA_DIR``; its stdout.

    Raises:
        AssertionError: it failed.
    """
    done = subprocess.run(
        [sys.executable, "-m", "tribal_memory", *args, "--data-dir", str(data_dir)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def _create_key(data_dir: Path, owner: str, *, admin: bool = False) -> dict[str, Any]:
    """A new API key for ``owner``: ``{key_id, owner, admin, key, ...}``."""
    args = ["keys", "create", "--owner", owner, "--json", *(["--admin"] if admin else [])]
    created: dict[str, Any] = json.loads(_tribal(*args, data_dir=data_dir).splitlines()[-1])
    return created


def _plugin_config(
    server: ServerProcess, keys: dict[str, dict[str, Any]], **extra: Any
) -> dict[str, Any]:
    """The plugin's config: the server and AGENT's key (not an admin key)."""
    return {"baseUrl": server.base_url, "apiKey": keys["main"]["key"], **extra}


def _citation(result: dict[str, Any]) -> str:
    start, end = result["startLine"], result["endLine"]
    return f"{result['path']}#L{start}" if start == end else f"{result['path']}#L{start}-L{end}"


READ_KEYS = {"path", "startLine", "endLine", "score", "snippet", "source", "corpus", "citation"}


MEMORY_FILES = ["MEMORY.md", "memory/2026-03-02.md", "memory/runbook.md"]
"""The workspace files memory-core indexes (not AGENTS.md)."""


def test_setup_command_plans_then_ingests_and_installs(setup: Setup) -> None:
    planned, done = setup.setup_runs["planned"], setup.setup_runs["done"]
    for summary in (planned, done):
        assert summary["agent"] == AGENT and summary["files"] == MEMORY_FILES
        assert summary["node"] == f"v{NODE_VERSION}" and OPENCLAW_VERSION in summary["openclaw"]
        assert summary["key"] == "created"  # the server requires keys
    assert planned["dry_run"] is True and "ingested" not in planned
    assert done["plugin_dir"] == str(PLUGIN_DIR.resolve())
    assert done["ingested"]["created"] == len(MEMORY_FILES)
    documents = httpx.get(
        f"{setup.server.base_url}/v1/documents", params={"owner": AGENT}, headers=setup.admin
    ).json()
    listed = documents["documents"] if isinstance(documents, dict) else documents
    assert sorted(d["path"] for d in listed) == sorted(MEMORY_FILES)


def test_installed_plugin_holds_the_memory_slot(setup: Setup) -> None:
    config = json.loads(setup.openclaw.config_path.read_text(encoding="utf-8"))
    assert config["plugins"]["slots"]["memory"] == "tribal-memory"
    assert config["plugins"]["entries"]["tribal-memory"]["enabled"] is True
    inspected = setup.openclaw.run("plugins", "inspect", "tribal-memory", "--runtime")
    assert "Status: loaded" in inspected and "before_prompt_build" in inspected
    assert "agent_end" in inspected
    assert (
        "memory_search, memory_get, memory_feedback, memory_capture, memory_list, memory_update, "
        "memory_delete" in inspected
    )
    # `openclaw status --all` asked the plugin's runtime, which asked the server with
    # AGENT's key, which may not read the store-wide /v1/stats.
    key = {"authorization": f"Bearer {setup.keys['main']['key']}"}
    assert httpx.get(f"{setup.server.base_url}/v1/stats", headers=key).status_code == 403
    memory = setup.status["memory"]
    assert (memory["provider"], memory["agentId"]) == ("tribal-memory", AGENT)
    assert memory["files"] == len(MEMORY_FILES) and memory["chunks"] >= len(MEMORY_FILES)
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
    assert isinstance(ours["debug"], dict) and isinstance(core["debug"], dict)
    assert ours["debug"]["hits"] == len(ours["results"])
    if args.get("corpus") == "all":
        assert ours["corpora"] == core["corpora"]
    # What memory-core does not search, the plugin does not return either.
    assert all(r["path"] != "AGENTS.md" for r in ours["results"])
    if args.get("minScore", 0) > 1:
        return  # memory-core keeps keyword matches under any minScore; we drop them
    assert ours["results"] and core["results"]
    assert len(ours["results"]) <= args.get("maxResults", 6)
    # The same file answers first; each result reads as memory-core's does.
    assert ours["results"][0]["path"] == core["results"][0]["path"] == "memory/2026-03-02.md"
    for result in ours["results"] + core["results"]:
        assert set(result) >= READ_KEYS
        assert set(result["provenance"]) == {"originClass", "sessionKind", "observedAt"}
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


def _retrieval_stats(setup: Setup) -> dict[str, Any]:
    response = httpx.get(
        f"{setup.server.base_url}/v1/stats/retrieval", params={"owner": AGENT}, headers=setup.admin
    )
    response.raise_for_status()
    overall: dict[str, Any] = response.json()["overall"]
    return overall


def _turn(
    setup: Setup, session: int | str, message: str = QUESTION, *, agent: str = AGENT
) -> list[dict[str, Any]]:
    """One agent turn in session ``e2e-<session>``; the stub model's requests during it."""
    before = len(setup.stub.requests)
    out = setup.openclaw.run(
        "agent", "--agent", agent, "--session-key", f"agent:{agent}:e2e-{session}",
        "-m", message, "--json", "--timeout", "150",
        timeout_s=TURN_TIMEOUT_S,
    )  # fmt: skip
    reply = json.loads(out[out.index("{") :])
    assert reply["status"] == "ok", out
    expected = FINAL_TEXT if message.endswith("?") else STATEMENT_TEXT
    assert [p["text"] for p in reply["result"]["payloads"]] == [expected], _outline(
        setup.stub.requests[before:]
    )
    # Only this turn's requests: the gateway may run other agent turns of its
    # own (a heartbeat, say) against the same model meanwhile.
    return [r for r in setup.stub.requests[before:] if _asks(r, message)]


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
            text = json.dumps(m.get("content"))[:300] if m.get("role") != "system" else ""
            parts.append(f"{m.get('role')}{calls or ''} {text}")
        lines.append(" | ".join(parts))
    return "\n".join(lines)


def _tool_results(request: dict[str, Any]) -> dict[str, Any]:
    """The memory tools' answers in a model request, by tool name (also through tool_call)."""
    return tool_answers(request["messages"])


def _offered(request: dict[str, Any]) -> set[str]:
    """The names of the tools a model request offers."""
    return {t["function"]["name"] for t in request.get("tools") or []}


def test_agent_turns_feed_back_and_learn(setup: Setup) -> None:
    started = _retrieval_stats(setup)
    seen: list[dict[str, Any]] = []
    for number in (1, 2, 3):
        requests = _turn(setup, number)
        assert len(requests) == 3, _outline(requests)  # search, feedback, reply
        first, last = requests[0], requests[-1]
        # OpenClaw's default Tool Search: the memory tools are deferred, called via tool_call.
        assert "tool_call" in _offered(first) and "memory_search" not in _offered(first)
        calls = [c["function"]["name"] for m in last["messages"] for c in m.get("tool_calls") or []]
        assert calls == ["tool_call", "tool_call"], _outline(requests)
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
        stats = _retrieval_stats(setup)
        assert stats["with_feedback"] == started["with_feedback"] + number
        assert stats["cache_hits"] == started["cache_hits"]  # not proven yet
    # (c) Three successes: the fourth time the question is answered from the cache.
    _turn(setup, 4)
    assert _retrieval_stats(setup)["cache_hits"] > started["cache_hits"]
    status, again = setup.gateway.invoke("memory_search", {"query": QUESTION})
    assert status == 200 and again["results"][0]["path"] == "memory/2026-03-02.md"
    assert again["results"][0]["score"] >= seen[0]["results"][0]["score"]


def _user_text(request: dict[str, Any]) -> str:
    return "\n".join(str(m["content"]) for m in request["messages"] if m.get("role") == "user")


def test_auto_recall_switched_off_and_direct_tools(setup: Setup) -> None:
    """Recall off in the plugin's config, and Tool Search off: the tools offered directly."""
    settings = _plugin_config(setup.server, setup.keys, autoRecall={"enabled": False})
    setup.openclaw.run(
        "config", "set", "plugins.entries.tribal-memory.config", json.dumps(settings),
        "--strict-json",
    )  # fmt: skip
    setup.openclaw.run("config", "set", "tools.toolSearch", "false", "--strict-json")
    setup.gateway.stop()
    setup.gateway.start()
    before = _retrieval_stats(setup)["retrievals"]
    requests = _turn(setup, 5)
    assert QUESTION in _user_text(requests[0]) and "<knowledge-graph>" not in _user_text(
        requests[0]
    )
    assert {"memory_search", "memory_feedback"} <= _offered(requests[0])
    calls = [
        c["function"]["name"] for m in requests[-1]["messages"] for c in m.get("tool_calls") or []
    ]
    assert calls == ["memory_search", "memory_feedback"]
    # The tools still answer: one retrieval (the tool's search), no /v1/context search.
    assert _tool_results(requests[-1])["memory_feedback"]["usedPaths"] == ["memory/2026-03-02.md"]
    assert _retrieval_stats(setup)["retrievals"] == before + 1


def test_memory_capture_through_the_gateway_stores_a_fact(setup: Setup) -> None:
    fact = "The release train leaves on Thursdays at noon."
    status, stored = setup.gateway.invoke("memory_capture", {"content": fact, "tags": ["release"]})
    assert status == 200 and stored["status"] == "created", stored
    status, again = setup.gateway.invoke("memory_capture", {"content": fact})
    assert status == 200 and (again["status"], again["memoryId"]) == ("exists", stored["memoryId"])
    status, got = setup.gateway.invoke("memory_get", {"path": stored["path"]})
    assert status == 200 and fact in got["text"], got
    # The agent corrects, then forgets, its own memory.
    status, listed = setup.gateway.invoke("memory_list", {"tag": "release"})
    assert status == 200 and [m["path"] for m in listed["memories"]] == [stored["path"]]
    fixed_fact = "The release train leaves on Fridays at noon."
    status, fixed = setup.gateway.invoke(
        "memory_update", {"path": stored["path"], "content": fixed_fact}
    )
    assert status == 200 and fixed["status"] == "updated", fixed
    # New text, new path (a memory's id is its owner's and text's): the answer names it.
    assert fixed_fact in setup.gateway.invoke("memory_get", {"path": fixed["path"]})[1]["text"]
    status, gone = setup.gateway.invoke("memory_delete", {"path": fixed["path"]})
    assert status == 200 and gone["status"] == "deleted", gone
    status, refused = setup.gateway.invoke("memory_delete", {"path": "MEMORY.md"})
    assert (
        status == 200 and refused["changed"] is False and "ingesting it again" in refused["error"]
    )


def _memories(setup: Setup, **params: Any) -> list[dict[str, Any]]:
    """AGENT's memories (``GET /v1/memories``, admin key), ``params`` as filters."""
    response = httpx.get(
        f"{setup.server.base_url}/v1/memories",
        params={"owner": AGENT, "include_shared": False, "limit": 100, **params},
        headers=setup.admin,
    )
    response.raise_for_status()
    body = response.json()
    memories: list[dict[str, Any]] = body["memories"] if isinstance(body, dict) else body
    return memories


def test_conversation_is_captured_and_recalled_in_a_later_session(setup: Setup) -> None:
    """autoCapture (agent_end): turns with the session id and order, then recalled later."""
    said = [
        "My cat is called Miso and she sleeps on the bookshelf all afternoon.",
        "I moved to Lisbon in the spring of 2025 for the new job.",
        "Ok",  # too short to keep
    ]
    for message in said:
        _turn(setup, "capture-1", message)
    deadline = time.monotonic() + 30
    turns: list[dict[str, Any]] = []
    while time.monotonic() < deadline:  # agent_end hooks run after the reply is sent
        keep = ("Miso", "Lisbon", STATEMENT_TEXT)
        turns = [
            m for m in _memories(setup, tag="conversation") if any(w in m["content"] for w in keep)
        ]
        if len(turns) == 3:
            break
        time.sleep(0.5)
    by_content = {m["content"]: m for m in turns}
    assert set(by_content) == {
        f"User: {said[0]}",
        f"Assistant: {STATEMENT_TEXT}",
        f"User: {said[1]}",
    }, turns  # the repeated reply once, "Ok" not at all
    session_ids = {m["doc_id"] for m in turns}
    assert len(session_ids) == 1 and None not in session_ids
    order = [by_content[f"User: {said[0]}"], by_content[f"Assistant: {STATEMENT_TEXT}"],
             by_content[f"User: {said[1]}"]]  # fmt: skip
    assert [m["chunk_index"] for m in order] == [0, 1, 2]
    captured = _memories(setup, tag="conversation")
    for memory in captured:  # no recall block, no tool output, no bare questions
        assert (
            "<knowledge-graph>" not in memory["content"] and "retrievalId" not in memory["content"]
        )
        assert memory["content"] != f"User: {QUESTION}"
    # A later session: the agent's search finds what was said in the first one.
    requests = _turn(setup, "capture-2", "What is the name of my cat?")
    searched = _tool_results(requests[-1])["memory_search"]
    hit = next(r for r in searched["results"] if "Miso" in r["snippet"])
    assert hit["provenance"]["originClass"] == "user"
    status, read = setup.gateway.invoke("memory_get", {"path": hit["path"]})
    assert status == 200 and said[0] in read["text"]
    # scope: session searches this session's turns only, long-term everything but them.
    first_session = {f"memory/{m['memory_id']}.md" for m in turns}
    requests = _turn(setup, "capture-1", "What did I tell you about my cat in this conversation?")
    searched = _tool_results(requests[-1])["memory_search"]
    assert searched["results"], searched
    assert {r["path"] for r in searched["results"]} <= first_session
    assert any("Miso" in r["snippet"] for r in searched["results"])
    moved = "Which city did I move to, from earlier conversations?"
    requests = _turn(setup, "capture-1", moved)
    searched = _tool_results(requests[-1])["memory_search"]
    assert "error" not in searched, searched
    assert all(r["path"] not in first_session for r in searched["results"]), searched
    requests = _turn(setup, "capture-2", moved)  # from another session, it is long-term
    searched = _tool_results(requests[-1])["memory_search"]
    assert any("Lisbon" in r["snippet"] for r in searched["results"]), searched


def test_notes_written_to_the_workspace_are_indexed_by_the_server(setup: Setup) -> None:
    """(g) serve --watch-openclaw: a new note in memory/ is searchable, SOUL.md is not indexed."""
    note = setup.workspace / "memory" / "2026-03-05.md"
    note.write_text(
        "# 2026-03-05\n\nThe staging cluster kestrel moved to eu-central-1 today.\n",
        encoding="utf-8",
    )
    (setup.workspace / "SOUL.md").write_text("# Soul\n\nA kestrel is a small falcon.\n")
    deadline = time.monotonic() + 60
    paths: set[str] = set()
    while time.monotonic() < deadline and "memory/2026-03-05.md" not in paths:
        time.sleep(0.5)
        listed = httpx.get(
            f"{setup.server.base_url}/v1/documents", params={"owner": AGENT}, headers=setup.admin
        ).json()
        paths = {d["path"] for d in (listed["documents"] if isinstance(listed, dict) else listed)}
    assert paths == {*MEMORY_FILES, "memory/2026-03-05.md"}
    status, found = setup.gateway.invoke(
        "memory_search", {"query": "Where does the staging cluster kestrel run now?"}
    )
    assert status == 200 and found["results"][0]["path"] == "memory/2026-03-05.md", found
    log = setup.server_log.read_text(errors="replace")
    assert f"watching OpenClaw workspace {setup.workspace}" in log
    assert "memory/2026-03-05.md created for main" in log


def test_server_refusals_reach_the_model_with_the_servers_message(setup: Setup) -> None:
    # 409: a second feedback on one search naming other paths.
    _, searched = setup.gateway.invoke("memory_search", {"query": QUESTION})
    first = {"retrievalId": searched["retrievalId"], "usedPaths": [searched["results"][0]["path"]]}
    status, fed = setup.gateway.invoke("memory_feedback", first)
    assert status == 200 and fed["usedIds"], fed
    status, again = setup.gateway.invoke("memory_feedback", {**first, "usedPaths": []})
    assert status == 200, again
    assert again["recorded"] is False and again["code"] == "conflict"
    assert "already has feedback" in again["error"] and "409" in again["error"]
    assert "memory_search again" in again["action"]
    # 403: the plugin's key acts for AGENT, not for OTHER.
    session = f"agent:{OTHER}:main"
    status, search = setup.gateway.invoke("memory_search", {"query": QUESTION}, session)
    assert status == 200, search
    assert search["results"] == [] and search["disabled"] is search["unavailable"] is True
    assert f"'{AGENT}', not '{OTHER}'" in search["error"] and "403" in search["error"]
    assert OTHER in search["warning"] and "keys create --owner other" in search["action"]
    status, read = setup.gateway.invoke("memory_get", {"path": "MEMORY.md"}, session)
    assert status == 200 and read["status"] == "error" and read["text"] == ""
    assert read["code"] == "MEMORY_BACKEND_FORBIDDEN" and "403" in read["error"]


def test_revoked_key_answers_unauthorized_to_the_model(setup: Setup) -> None:
    """Next to last: it revokes the plugin's key."""
    _tribal("keys", "revoke", setup.keys["main"]["key_id"], data_dir=setup.data_dir)
    status, search = setup.gateway.invoke("memory_search", {"query": QUESTION})
    assert status == 200, search
    assert search["disabled"] is search["unavailable"] is True
    assert "unknown or revoked API key" in search["error"] and "401" in search["error"]
    assert "refused the API key" in search["warning"] and "apiKey" in search["action"]
    # Through an agent turn: the model reads the server's reason in the tool's answer.
    requests = _turn(setup, "revoked")
    answer = _tool_results(requests[-1])["memory_search"]
    assert "unknown or revoked API key" in answer["error"] and answer["action"]


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
