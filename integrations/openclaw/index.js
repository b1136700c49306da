// tribal-memory as OpenClaw's memory slot.
//
// The agent's memory tools (memory_search, memory_get, memory_feedback and
// memory_capture) are forwarded to a tribal-memory server over HTTP, as the
// agent the turn runs for (X-Agent-Id). At the start of each user turn the
// prompt is sent to POST /v1/context and the <knowledge-graph> block it
// returns is put in front of the prompt. The memory capability replaces
// memory-core's "Memory Recall" prompt section (it asks the model to report
// what it used through memory_feedback) and reports the server in
// `openclaw status`.
//
// Plain ES module, no build step, no dependencies beyond Node's fetch.

import { definePluginEntry } from "openclaw/plugin-sdk/plugin-entry";

const PLUGIN_ID = "tribal-memory";
const PROVIDER = "tribal-memory";
const TOOL_NAMES = ["memory_search", "memory_get", "memory_feedback", "memory_capture"];
const KNOWLEDGE_TAG = "<knowledge-graph>";
const MIN_PROMPT_CHARS = 5;

const DEFAULTS = Object.freeze({
  baseUrl: "http://127.0.0.1:18960",
  timeoutMs: 10_000,
  maxResults: 6,
  minScore: 0.35,
  captureTool: true,
  autoRecall: Object.freeze({
    enabled: true,
    topK: 3,
    minScore: 0.3,
    includeNeighbors: true,
    timeoutMs: 3_000,
  }),
});

// -- settings ------------------------------------------------------------------------

function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function positiveNumber(value, fallback) {
  return typeof value === "number" && Number.isFinite(value) && value > 0 ? value : fallback;
}

/** The plugin's settings: `plugins.entries.tribal-memory.config` over the defaults. */
export function resolveSettings(raw) {
  const config = isObject(raw) ? raw : {};
  const recall = isObject(config.autoRecall) ? config.autoRecall : {};
  const baseUrl = typeof config.baseUrl === "string" && config.baseUrl.trim()
    ? config.baseUrl.trim().replace(/\/+$/, "")
    : DEFAULTS.baseUrl;
  return {
    baseUrl,
    apiKey: typeof config.apiKey === "string" && config.apiKey.trim() ? config.apiKey.trim() : undefined,
    agentId: typeof config.agentId === "string" && config.agentId.trim() ? config.agentId.trim() : undefined,
    timeoutMs: positiveNumber(config.timeoutMs, DEFAULTS.timeoutMs),
    maxResults: positiveNumber(config.maxResults, DEFAULTS.maxResults),
    minScore: typeof config.minScore === "number" ? config.minScore : DEFAULTS.minScore,
    captureTool: config.captureTool !== false,
    autoRecall: {
      enabled: recall.enabled !== false,
      topK: positiveNumber(recall.topK, DEFAULTS.autoRecall.topK),
      minScore: typeof recall.minScore === "number" ? recall.minScore : DEFAULTS.autoRecall.minScore,
      includeNeighbors: recall.includeNeighbors !== false,
      timeoutMs: positiveNumber(recall.timeoutMs, DEFAULTS.autoRecall.timeoutMs),
      maxTokens: positiveNumber(recall.maxTokens, undefined),
    },
  };
}

// -- HTTP ----------------------------------------------------------------------------

/** The server could not be reached, timed out, or failed (5xx): memory is unavailable. */
class ServerUnavailable extends Error {}

/** The server refused the call (4xx): the arguments or the key are wrong. */
class ServerRefused extends Error {
  constructor(message, status, code) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** One request to the server; the parsed JSON answer, or ServerUnavailable / ServerRefused. */
async function request(settings, method, path, { agentId, body, timeoutMs, signal } = {}) {
  const headers = { accept: "application/json" };
  if (body !== undefined) headers["content-type"] = "application/json";
  if (agentId) headers["x-agent-id"] = agentId;
  if (settings.apiKey) headers.authorization = `Bearer ${settings.apiKey}`;
  const limit = timeoutMs ?? settings.timeoutMs;
  const timeout = AbortSignal.timeout(limit);
  const url = `${settings.baseUrl}${path}`;
  let response;
  try {
    response = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    });
  } catch (error) {
    if (signal?.aborted) throw error;
    const reason = timeout.aborted
      ? `no answer within ${limit} ms`
      : (error?.cause?.code ?? error?.cause?.message ?? error?.message ?? String(error));
    throw new ServerUnavailable(`tribal-memory server at ${settings.baseUrl} is unreachable (${reason})`);
  }
  let parsed;
  try {
    parsed = await response.json();
  } catch {
    parsed = undefined;
  }
  if (response.ok && parsed !== undefined) return parsed;
  const detail = isObject(parsed) && typeof parsed.detail === "string" ? parsed.detail : `HTTP ${response.status}`;
  if (response.status >= 400 && response.status < 500) {
    throw new ServerRefused(detail, response.status, isObject(parsed) ? parsed.error : undefined);
  }
  throw new ServerUnavailable(`tribal-memory server at ${settings.baseUrl} failed: ${detail}`);
}

function toolResult(value) {
  return { content: [{ type: "text", text: JSON.stringify(value, null, 2) }], details: value };
}

function unavailable(error, what) {
  return {
    disabled: true,
    unavailable: true,
    error: error.message,
    warning: `Memory is unavailable: ${what}`,
    action: "Start the tribal-memory server (tribal-memory serve) or fix plugins.entries.tribal-memory.config.baseUrl, then retry.",
  };
}

// -- citations (OpenClaw's memory.citations: auto | on | off) ------------------------

function citationsMode(config) {
  const mode = config?.memory?.citations;
  return mode === "on" || mode === "off" ? mode : "auto";
}

/** "auto" cites in direct chats only; a session key names its chat type after the agent id. */
function citationsOn(mode, sessionKey) {
  if (mode !== "auto") return mode === "on";
  if (typeof sessionKey !== "string") return true;
  const parts = sessionKey.toLowerCase().split(":");
  const rest = parts[0] === "agent" ? parts.slice(2) : parts;
  return !rest.includes("channel") && !rest.includes("group");
}

// -- tools ---------------------------------------------------------------------------

const SEARCH_PARAMETERS = {
  type: "object",
  properties: {
    query: { type: "string", description: "What to look for, in plain words." },
    maxResults: { type: "integer", minimum: 1, description: "Most results (default 6)." },
    minScore: { type: "number", description: "Least score of a result, in [0, 1] (default 0.35)." },
    corpus: {
      type: "string",
      enum: ["memory", "wiki", "all", "sessions"],
      description: "memory (the default) or all: memories and documents; wiki and sessions are not held by this backend.",
    },
  },
  required: ["query"],
  additionalProperties: false,
};

const GET_PARAMETERS = {
  type: "object",
  properties: {
    path: { type: "string", description: "A path from memory_search (e.g. memory/2026-03-02.md)." },
    from: { type: "integer", minimum: 1, description: "First line to read, 1-based." },
    lines: { type: "integer", minimum: 1, description: "How many lines (default 120)." },
    corpus: { type: "string", enum: ["memory", "wiki", "all"] },
  },
  required: ["path"],
  additionalProperties: false,
};

const FEEDBACK_PARAMETERS = {
  type: "object",
  properties: {
    retrievalId: { type: "string", description: "The retrievalId of the memory_search (or of the knowledge block) you used." },
    usedPaths: {
      type: "array",
      items: { type: "string" },
      description: "Paths (or citations) of the results you actually used; [] when none helped.",
    },
  },
  required: ["retrievalId", "usedPaths"],
  additionalProperties: false,
};

const CAPTURE_PARAMETERS = {
  type: "object",
  properties: {
    content: { type: "string", description: "One short, self-contained fact, decision or preference." },
    tags: { type: "array", items: { type: "string" }, description: "Optional labels, e.g. decision." },
  },
  required: ["content"],
  additionalProperties: false,
};

function pick(params, names) {
  const out = {};
  for (const name of names) if (params?.[name] !== undefined) out[name] = params[name];
  return out;
}

function createTools(api, ctx) {
  const settings = resolveSettings(api.pluginConfig);
  const agentId = settings.agentId ?? ctx?.agentId ?? "main";
  const currentConfig = () => ctx?.getRuntimeConfig?.() ?? ctx?.runtimeConfig ?? ctx?.config ?? api.config;
  const call = (name, body, signal) =>
    request(settings, "POST", `/v1/tools/${name}`, { agentId, body, signal });
  const refused = (error) => {
    if (error instanceof ServerRefused) throw new Error(`${error.message} (HTTP ${error.status})`);
    throw error;
  };

  // A tool call forwarded to the server: its answer as the tool result; when the
  // server cannot be reached, `whenDown(error, params)` answers instead (the shape
  // memory-core gives when memory is unavailable); other errors are refused.
  const answer = async (params, whenDown, ask) => {
    try {
      return toolResult(await ask());
    } catch (error) {
      if (error instanceof ServerUnavailable) return toolResult(whenDown(error, params));
      return refused(error);
    }
  };
  const forward = (name, fields, whenDown) => (_toolCallId, params, signal) =>
    answer(params, whenDown, () => call(name, pick(params, fields), signal));

  const tools = [
    {
      name: "memory_search",
      label: "Memory Search",
      description:
        "Search long-term memory (tribal-memory: hybrid semantic and keyword search over the agent's memories, shared team knowledge and ingested workspace files) before answering questions about prior work, decisions, dates, people, preferences or todos. Each result has a path and lines for memory_get. The answer carries a retrievalId: after using results, report them with memory_feedback. If the answer has disabled=true or unavailable=true, tell the user, with its warning and action.",
      parameters: SEARCH_PARAMETERS,
      async execute(_toolCallId, params, signal) {
        const mode = citationsMode(currentConfig());
        const body = {
          maxResults: settings.maxResults,
          minScore: settings.minScore,
          ...pick(params, ["query", "maxResults", "minScore", "corpus"]),
          citations: citationsOn(mode, ctx?.sessionKey) ? "on" : "off",
        };
        const whenDown = (error) => ({
          results: [],
          ...unavailable(error, "memory search could not reach the tribal-memory server."),
        });
        return answer(params, whenDown, async () => {
          const found = await call("memory_search", body, signal);
          if (isObject(found) && "citations" in found) found.citations = mode;
          return found;
        });
      },
    },
    {
      name: "memory_get",
      label: "Memory Get",
      description:
        "Read a memory or workspace file by the path memory_search returned: at most 120 lines from `from` unless `lines` says otherwise. status=ok means the text was read (truncated=true: continue from nextFrom); status=not_found means no such path; status=error means the read failed.",
      parameters: GET_PARAMETERS,
      execute: forward("memory_get", ["path", "from", "lines", "corpus"], (error, params) => ({
        path: typeof params?.path === "string" ? params.path : "",
        text: "",
        status: "error",
        code: "MEMORY_BACKEND_UNAVAILABLE",
        error: error.message,
      })),
    },
    {
      name: "memory_feedback",
      label: "Memory Feedback",
      description:
        "After answering with memory, report which memory_search results you actually used: the search's retrievalId and the paths (or citations) you used; usedPaths=[] when none helped. Memory learns from this, so the same and similar questions come back better and faster.",
      parameters: FEEDBACK_PARAMETERS,
      execute: forward("memory_feedback", ["retrievalId", "usedPaths"], (error) => ({
        recorded: false,
        ...unavailable(error, "the feedback was not recorded."),
      })),
    },
  ];
  if (settings.captureTool) {
    tools.push({
      name: "memory_capture",
      label: "Memory Capture",
      description:
        "Store a durable fact, decision or preference in long-term memory (one short, self-contained statement). Storing the same text again changes nothing.",
      parameters: CAPTURE_PARAMETERS,
      execute: forward("memory_capture", ["content", "tags"], (error) => ({
        stored: false,
        ...unavailable(error, "the fact was not stored."),
      })),
    });
  }
  return tools;
}

// -- the prompt section --------------------------------------------------------------

function buildPromptSection({ availableTools, citationsMode: mode }) {
  const has = (name) => availableTools?.has?.(name) === true;
  if (!has("memory_search") && !has("memory_get")) return [];
  const lines = ["## Memory Recall"];
  if (has("memory_search")) {
    lines.push(
      `Before answering anything about prior work, decisions, dates, people, preferences or todos, run memory_search${has("memory_get") ? "; read more of a hit with memory_get, only the lines you need" : ""}. If you are unsure after searching, say that you checked.`,
    );
  }
  if (has("memory_feedback")) {
    lines.push(
      "After you answer using memory_search results (or a <knowledge-graph> block), call memory_feedback once with that search's retrievalId and the paths you actually used (usedPaths: [] when none helped). This is how memory learns what answers which question.",
    );
  }
  lines.push("If memory answers disabled=true or unavailable=true, tell the user, with its warning and action.");
  lines.push(
    mode === "off"
      ? "Citations are off: do not mention memory paths or line numbers unless the user asks."
      : "Citations: include Source: <path#line> when it helps the user check a memory snippet.",
  );
  lines.push("");
  return lines;
}

// -- automatic recall at the start of a turn -----------------------------------------

function promptOf(event) {
  if (typeof event?.currentUserMessage === "string") return event.currentUserMessage;
  return typeof event?.prompt === "string" ? event.prompt : "";
}

/** The <knowledge-graph> block for a turn's prompt, with how to report it; undefined to add nothing. */
async function recallFor(settings, agentId, prompt, logger) {
  const text = prompt.trim();
  if (text.length < MIN_PROMPT_CHARS || text.includes(KNOWLEDGE_TAG)) return undefined;
  const body = {
    prompt: text,
    agent_id: agentId,
    top_k: settings.autoRecall.topK,
    min_score: settings.autoRecall.minScore,
    include_neighbors: settings.autoRecall.includeNeighbors,
  };
  if (settings.autoRecall.maxTokens) body.max_tokens = settings.autoRecall.maxTokens;
  let answer;
  try {
    answer = await request(settings, "POST", "/v1/context", {
      agentId,
      body,
      timeoutMs: settings.autoRecall.timeoutMs,
    });
  } catch (error) {
    logger?.warn?.(`tribal-memory: automatic recall skipped: ${error.message}`);
    return undefined;
  }
  if (!isObject(answer) || typeof answer.context !== "string" || !answer.context) return undefined;
  const paths = [...new Set((answer.hits ?? []).map((hit) => hit?.path).filter((p) => typeof p === "string"))];
  if (!answer.retrieval_id || paths.length === 0) return answer.context;
  return `${answer.context}\n(memory retrievalId ${answer.retrieval_id}; if you use these notes, report them with memory_feedback, usedPaths from: ${paths.join(", ")})`;
}

// -- status and the host's memory runtime --------------------------------------------

function createManager(settings, agentId, snapshot) {
  return {
    status() {
      return {
        backend: PROVIDER,
        provider: PROVIDER,
        model: snapshot.model,
        files: snapshot.files,
        chunks: snapshot.chunks,
        sources: ["memory"],
        fts: { enabled: true, available: snapshot.ftsIndexed },
        vector: { enabled: true, available: true },
        custom: { baseUrl: settings.baseUrl, agentId },
      };
    },
    async search(query, opts = {}) {
      const answer = await request(settings, "POST", "/v1/tools/memory_search", {
        agentId,
        signal: opts.signal,
        body: {
          query,
          maxResults: opts.maxResults ?? settings.maxResults,
          minScore: opts.minScore ?? settings.minScore,
          citations: "off",
        },
      });
      return (answer.results ?? []).map((hit) => ({
        path: hit.path,
        startLine: hit.startLine,
        endLine: hit.endLine,
        score: hit.score,
        vectorScore: hit.vectorScore,
        textScore: hit.textScore,
        snippet: hit.snippet,
        source: "memory",
      }));
    },
    async readFile({ relPath, from, lines }) {
      return await request(settings, "POST", "/v1/tools/memory_get", {
        agentId,
        body: { path: relPath, ...(from ? { from } : {}), ...(lines ? { lines } : {}) },
      });
    },
    async probeEmbeddingAvailability() {
      return { ok: true };
    },
    async probeVectorAvailability() {
      return true;
    },
    async close() {},
  };
}

async function openManager(settings, agentId) {
  try {
    const stats = await request(settings, "GET", "/v1/stats", { agentId });
    const documents = await request(settings, "GET", `/v1/documents?owner=${encodeURIComponent(agentId)}`, { agentId });
    const owners = isObject(stats.owners) ? stats.owners : {};
    const snapshot = {
      model: stats.embedding_model,
      ftsIndexed: stats.fts_indexed === true,
      chunks: (owners[agentId] ?? 0) + (agentId === "shared" ? 0 : (owners.shared ?? 0)),
      files: Array.isArray(documents) ? documents.length : (documents?.documents?.length ?? 0),
    };
    return { manager: createManager(settings, agentId, snapshot) };
  } catch (error) {
    return { manager: null, error: error.message };
  }
}

// -- the plugin ----------------------------------------------------------------------

export default definePluginEntry({
  id: PLUGIN_ID,
  name: "Tribal Memory",
  description:
    "Memory slot backed by a tribal-memory server: memory tools over HTTP, automatic recall, and retrieval that learns from the agent's feedback.",
  kind: "memory",
  register(api) {
    const settings = resolveSettings(api.pluginConfig);

    api.registerMemoryCapability({
      promptBuilder: buildPromptSection,
      runtime: {
        async getMemorySearchManager(params) {
          return await openManager(settings, settings.agentId ?? params.agentId ?? "main");
        },
        resolveMemoryBackendConfig() {
          return { backend: "builtin" };
        },
        async closeAllMemorySearchManagers() {},
        async closeMemorySearchManager() {},
      },
    });

    const names = settings.captureTool ? TOOL_NAMES : TOOL_NAMES.slice(0, 3);
    api.registerTool((ctx) => createTools(api, ctx), { names });

    if (settings.autoRecall.enabled) {
      api.on("before_prompt_build", async (event, ctx) => {
        if (ctx?.trigger && ctx.trigger !== "user") return undefined;
        const agentId = settings.agentId ?? ctx?.agentId ?? "main";
        const block = await recallFor(settings, agentId, promptOf(event), api.logger);
        ctx?.hookInvocation?.assertActive?.();
        return block ? { prependContext: block } : undefined;
      });
    }
  },
});
