// The "Memory Recall" prompt section and the <knowledge-graph> block put in
// front of each user turn.

import { request } from "./http.js";
import { MEMORY_PATH_PATTERNS } from "./paths.js";
import { isObject } from "./settings.js";

export const KNOWLEDGE_TAG = "<knowledge-graph>";
const MIN_PROMPT_CHARS = 5;

/** The prompt section replacing memory-core's "Memory Recall" (lines; [] without memory tools). */
export function buildPromptSection({ availableTools, citationsMode: mode }) {
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
      "After you answer using memory_search results (or a <knowledge-graph> block), call memory_feedback once with that search's retrievalId and the citations (path#La-Lb) of what you actually used (usedPaths: [] when none helped). This is how memory learns what answers which question.",
    );
  }
  lines.push("If memory answers disabled=true or unavailable=true, or a memory tool answers an error with an action, tell the user, with its warning and action.");
  lines.push(
    mode === "off"
      ? "Citations are off: do not mention memory paths or line numbers unless the user asks."
      : "Citations: include Source: <path#line> when it helps the user check a memory snippet.",
  );
  lines.push("");
  return lines;
}

/** The user's prompt of a before_prompt_build event ("" when none). */
export function promptOf(event) {
  if (typeof event?.currentUserMessage === "string") return event.currentUserMessage;
  return typeof event?.prompt === "string" ? event.prompt : "";
}

/** A hit's citation as memory-core writes it: path#La-Lb (path#La for one line, path alone without lines). */
function citationOf(hit) {
  if (typeof hit?.path !== "string") return undefined;
  const { start_line: start, end_line: end } = hit;
  if (!Number.isInteger(start) || !Number.isInteger(end)) return hit.path;
  return start === end ? `${hit.path}#L${start}` : `${hit.path}#L${start}-L${end}`;
}

/**
 * The <knowledge-graph> block for a turn's prompt (POST /v1/context), followed
 * by a line with its retrievalId and the citations (path#La-Lb) to report; undefined to
 * add nothing (short prompt, a prompt already holding a block, no match, or
 * the server failing: that is logged, the turn goes on). Only what memory-core
 * would serve (MEMORY_PATH_PATTERNS) is recalled, and, under the default scope
 * long-term, nothing of the current session `sessionId` (it is in the
 * conversation already).
 */
export async function recallFor(settings, agentId, prompt, logger, sessionId) {
  const text = prompt.trim();
  if (text.length < MIN_PROMPT_CHARS || text.includes(KNOWLEDGE_TAG)) return undefined;
  const body = {
    prompt: text,
    agent_id: agentId,
    top_k: settings.autoRecall.topK,
    min_score: settings.autoRecall.minScore,
    include_neighbors: settings.autoRecall.includeNeighbors,
    scope: settings.autoRecall.scope,
    paths: MEMORY_PATH_PATTERNS,
  };
  if (typeof sessionId === "string" && sessionId) body.conversation_id = sessionId;
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
  const cited = [...new Set((answer.hits ?? []).map(citationOf).filter((c) => c !== undefined))];
  if (!answer.retrieval_id || cited.length === 0) return answer.context;
  return `${answer.context}\n(memory retrievalId ${answer.retrieval_id}; if you use these notes, report the ones you used with memory_feedback, usedPaths from: ${cited.join(", ")})`;
}

/** The text a recall added to a user message, removed (for capture): the block and its line. */
export function withoutRecall(text) {
  return text
    .replace(/<knowledge-graph>[\s\S]*?<\/knowledge-graph>/g, "")
    .replace(/^\(memory retrievalId [^\n]*\)$/gm, "")
    .trim();
}
