// The agent's memory tools, each forwarded to POST {baseUrl}/v1/tools/<name>.

import { describeFailure, getFailure, searchFailure, toolResult, writeFailure } from "./answers.js";
import { request } from "./http.js";
import { MEMORY_PATH_PATTERNS, isMemoryPath, pathNotAllowed } from "./paths.js";
import { isObject, resolveSettings } from "./settings.js";

export const TOOL_NAMES = ["memory_search", "memory_get", "memory_feedback", "memory_capture"];
/** Tools to correct memory: the agent's own captured facts and conversation turns. */
export const MANAGE_TOOL_NAMES = ["memory_list", "memory_update", "memory_delete"];

// -- citations (OpenClaw's memory.citations: auto | on | off) ------------------------

function citationsMode(config) {
  const mode = config?.memory?.citations;
  return mode === "on" || mode === "off" ? mode : "auto";
}

/** "auto" cites in direct chats only; a session key names its chat type after the agent id. */
export function chatType(sessionKey) {
  if (typeof sessionKey !== "string") return "direct";
  const parts = sessionKey.toLowerCase().split(":");
  const rest = parts[0] === "agent" ? parts.slice(2) : parts;
  if (rest.includes("channel")) return "channel";
  return rest.includes("group") ? "group" : "direct";
}

function citationsOn(mode, sessionKey) {
  return mode === "auto" ? chatType(sessionKey) === "direct" : mode === "on";
}

// -- parameters ----------------------------------------------------------------------

const SEARCH_PARAMETERS = {
  type: "object",
  properties: {
    query: { type: "string", description: "What to look for, in plain words." },
    maxResults: { type: "integer", minimum: 1, description: "Most results (default 6)." },
    minScore: { type: "number", description: "Least score of a result, in [0, 1] (default 0.02; scores are calibrated relevance)." },
    corpus: {
      type: "string",
      enum: ["memory", "wiki", "all", "sessions"],
      description: "memory (the default) or all: memories and documents; wiki and sessions are not held by this backend.",
    },
    scope: {
      type: "string",
      enum: ["all", "session", "long-term"],
      description:
        "all (the default); session: only what was said in this conversation (its captured turns); long-term: everything else (facts you stored, the memory files, earlier conversations).",
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
      description: "Citations (path#La-Lb) or paths of the results you actually used; [] when none helped.",
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

const PATH_PARAMETER = {
  type: "string",
  description: "The memory's path, memory/<id>.md, from memory_search or memory_list.",
};

const LIST_PARAMETERS = {
  type: "object",
  properties: {
    tag: { type: "string", description: "Only memories with this tag (conversation: captured turns)." },
    limit: { type: "integer", minimum: 1, description: "Most memories (default 20)." },
    after: { type: "string", description: "The nextAfter of the previous page." },
  },
  additionalProperties: false,
};

const UPDATE_PARAMETERS = {
  type: "object",
  properties: {
    path: PATH_PARAMETER,
    content: { type: "string", description: "The corrected text (replaces the old one)." },
    tags: { type: "array", items: { type: "string" }, description: "New tags (replace the old ones)." },
  },
  required: ["path"],
  additionalProperties: false,
};

const DELETE_PARAMETERS = {
  type: "object",
  properties: { path: PATH_PARAMETER },
  required: ["path"],
  additionalProperties: false,
};

function pick(params, names) {
  const out = {};
  for (const name of names) if (params?.[name] !== undefined) out[name] = params[name];
  return out;
}

// -- the tools -----------------------------------------------------------------------

/**
 * The tools for one agent run: `ctx` is OpenClaw's tool context (agentId,
 * sessionKey, config getters). Each tool answers with the server's JSON; when
 * the server is down or refuses the call, with the failure shapes of
 * answers.js (never a thrown error, so the model sees why).
 */
export function createTools(api, ctx) {
  const settings = resolveSettings(api.pluginConfig);
  const agentId = settings.agentId ?? ctx?.agentId ?? "main";
  const currentConfig = () => ctx?.getRuntimeConfig?.() ?? ctx?.runtimeConfig ?? ctx?.config ?? api.config;
  const call = (name, body, signal) => request(settings, "POST", `/v1/tools/${name}`, { agentId, body, signal });

  // The server's answer as the tool result; a failure as `onFailure(described)`.
  const answer = async (signal, what, onFailure, ask) => {
    try {
      return toolResult(await ask());
    } catch (error) {
      if (signal?.aborted) throw error;
      return toolResult(onFailure(describeFailure(error, { agentId, what })));
    }
  };

  const tools = [
    {
      name: "memory_search",
      label: "Memory Search",
      description:
        "Search long-term memory (tribal-memory: hybrid semantic and keyword search over the agent's memories, earlier conversations, shared team knowledge and the workspace's MEMORY.md, USER.md and memory/ files) before answering questions about prior work, decisions, dates, people, preferences or todos. scope narrows it: session = only this conversation's turns, long-term = everything but them (the default, all, searches both). Each result has a path, lines and a citation (path#La-Lb) for memory_get. The answer carries a retrievalId: after using results, report their citations with memory_feedback. If the answer has disabled=true or unavailable=true, tell the user, with its warning and action.",
      parameters: SEARCH_PARAMETERS,
      async execute(_toolCallId, params, signal) {
        const mode = citationsMode(currentConfig());
        const body = {
          maxResults: settings.maxResults,
          minScore: settings.minScore,
          ...pick(params, ["query", "maxResults", "minScore", "corpus", "scope"]),
          citations: citationsOn(mode, ctx?.sessionKey) ? "on" : "off",
          // As memory-core: only the workspace's memory files (and captured memories),
          // filtered by the server before it ranks.
          paths: MEMORY_PATH_PATTERNS,
          // The conversation `scope` refers to: autoCapture stores its turns with this doc_id.
          ...(typeof ctx?.sessionId === "string" && ctx.sessionId ? { conversationId: ctx.sessionId } : {}),
        };
        return answer(signal, "memory search could not reach the tribal-memory server.", searchFailure, async () => {
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
        "Read a memory or memory file (MEMORY.md, USER.md, memory/...) by the path memory_search returned: at most 120 lines from `from` unless `lines` says otherwise. status=ok means the text was read (truncated=true: continue from nextFrom); status=not_found means no such path; status=error means the read failed or the path is not a memory file (code says which).",
      parameters: GET_PARAMETERS,
      async execute(_toolCallId, params, signal) {
        const path = typeof params?.path === "string" ? params.path : "";
        if (!isMemoryPath(path)) return toolResult(pathNotAllowed(path));
        return answer(
          signal,
          "the memory could not be read from the tribal-memory server.",
          (failure) => getFailure(failure, path),
          () => call("memory_get", pick(params, ["path", "from", "lines", "corpus"]), signal),
        );
      },
    },
    {
      name: "memory_feedback",
      label: "Memory Feedback",
      description:
        "After answering with memory, report which memory_search results you actually used: the search's retrievalId and their citations (path#La-Lb) or paths; usedPaths=[] when none helped. Once per search. Memory learns from this, so the same and similar questions come back better and faster.",
      parameters: FEEDBACK_PARAMETERS,
      execute: (_toolCallId, params, signal) =>
        answer(
          signal,
          "the feedback was not recorded.",
          (failure) => writeFailure(failure, "recorded"),
          () => call("memory_feedback", pick(params, ["retrievalId", "usedPaths"]), signal),
        ),
    },
  ];
  if (settings.captureTool) {
    tools.push({
      name: "memory_capture",
      label: "Memory Capture",
      description:
        "Store a durable fact, decision or preference in long-term memory (one short, self-contained statement). Storing the same text again changes nothing.",
      parameters: CAPTURE_PARAMETERS,
      execute: (_toolCallId, params, signal) =>
        answer(
          signal,
          "the fact was not stored.",
          (failure) => writeFailure(failure, "stored"),
          () => call("memory_capture", pick(params, ["content", "tags"]), signal),
        ),
    });
  }
  const manage = (name, label, description, parameters, fields) => ({
    name,
    label,
    description,
    parameters,
    execute: (_toolCallId, params, signal) =>
      answer(
        signal,
        "memory could not be changed.",
        (failure) => writeFailure(failure, "changed"),
        () => call(name, pick(params, fields), signal),
      ),
  });
  tools.push(
    manage(
      "memory_list",
      "Memory List",
      "List your own stored memories (captured facts and conversation turns; not the workspace files): path, text, tags, dates; page on with after=nextAfter.",
      LIST_PARAMETERS,
      ["tag", "limit", "after"],
    ),
    manage(
      "memory_update",
      "Memory Update",
      "Correct one of your own memories by its path (memory/<id>.md): new content and/or tags. New content moves it to a new path, given in the answer. Workspace files change by editing the file.",
      UPDATE_PARAMETERS,
      ["path", "content", "tags"],
    ),
    manage(
      "memory_delete",
      "Memory Delete",
      "Forget one of your own memories by its path (memory/<id>.md), e.g. when the user asks or it is wrong. status=not_found: no memory of yours at that path.",
      DELETE_PARAMETERS,
      ["path"],
    ),
  );
  return tools;
}
