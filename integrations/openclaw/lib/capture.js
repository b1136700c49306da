// autoCapture: after each agent run (OpenClaw's agent_end hook), the user and
// assistant turns of the conversation are stored as memories of the agent,
// with the OpenClaw session id as doc_id and the turn's position as
// chunk_index, so the server can use the session structure when it ranks.

import { request } from "./http.js";
import { withoutRecall } from "./recall.js";
import { chatType } from "./tools.js";

const ROLES = { user: "User", assistant: "Assistant" };
// OpenClaw's envelope before a user message: "[Thu 2026-11-26 17:20 UTC] ...".
const STAMP = /^\[[^\]\n]*\d[^\]\n]*\]\s*/;
// What OpenClaw adds to a run's input for the model, not said by the user.
const INTERNAL = /<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>[\s\S]*?<<<END_OPENCLAW_INTERNAL_CONTEXT>>>/g;

function textOf(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .filter((part) => part && (part.type === "text" || part.type === "output_text") && typeof part.text === "string")
    .map((part) => part.text)
    .join("\n");
}

function isoTime(value) {
  if (typeof value === "number" && Number.isFinite(value)) return new Date(value).toISOString();
  if (typeof value === "string" && !Number.isNaN(Date.parse(value))) return new Date(value).toISOString();
  return undefined;
}

/** One question and nothing else: it states no fact, and stored it would answer itself later. */
function isBareQuestion(text) {
  return text.endsWith("?") && !/[.!?]\s/.test(text.slice(0, -1));
}

/**
 * The turns worth keeping from a run's messages: `[{role, text, index, time?}]`.
 * Only user and assistant messages count (tool calls and tool output are
 * skipped); `index` is the message's position among the conversation's user
 * and assistant messages (so it is stable when later runs carry the same
 * history). A user message loses the recall block the plugin added to it and
 * OpenClaw's time stamp; text shorter than `minChars` (after that), repeated
 * text, text holding a <knowledge-graph> block and a user message that is one
 * bare question are skipped; text over `maxChars` is cut.
 */
export function turnsToCapture(messages, { minChars, maxChars }) {
  const turns = [];
  const seen = new Set();
  let index = -1;
  for (const message of Array.isArray(messages) ? messages : []) {
    const role = message?.role;
    if (!(role in ROLES)) continue;
    index += 1;
    let text = textOf(message.content);
    if (role === "user") text = withoutRecall(text.replace(INTERNAL, "")).replace(STAMP, "");
    text = text.trim();
    if (text.length < minChars || text.includes("<knowledge-graph>") || seen.has(text)) continue;
    if (role === "user" && isBareQuestion(text)) continue;
    seen.add(text);
    turns.push({ role, text: text.slice(0, maxChars), index, time: isoTime(message.timestamp) });
  }
  return turns;
}

/**
 * Store `turns` for `agentId` in one POST /v1/memories/batch (idempotent: a
 * turn stored before is answered "exists"). Returns how many were new.
 * Throws what request() throws.
 */
export async function storeTurns(settings, agentId, turns, { sessionId, sessionKey }) {
  if (turns.length === 0) return 0;
  const memories = turns.map((turn) => ({
    content: `${ROLES[turn.role]}: ${turn.text}`,
    owner: agentId,
    kind: "fact",
    tags: ["conversation", turn.role],
    source: `openclaw:session/${sessionId}`,
    doc_id: sessionId,
    chunk_index: turn.index,
    ...(turn.time ? { event_time: turn.time } : {}),
    metadata: {
      role: turn.role,
      originClass: turn.role === "user" ? "user" : "agent",
      sessionKind: chatType(sessionKey),
      ...(sessionKey ? { sessionKey } : {}),
    },
  }));
  const answer = await request(settings, "POST", "/v1/memories/batch", {
    agentId,
    body: { memories, near_duplicates: false },
    timeoutMs: settings.autoCapture.timeoutMs,
  });
  return (answer?.results ?? []).filter((result) => result?.status === "created").length;
}

/** The agent_end handler: captures the run's conversation; failures are logged, never thrown. */
export function captureHandler(settings, logger) {
  return async (event, ctx) => {
    if (event?.success === false) return;
    const sessionId = ctx?.sessionId;
    if (typeof sessionId !== "string" || !sessionId) return;
    const agentId = settings.agentId ?? ctx?.agentId ?? "main";
    const turns = turnsToCapture(event?.messages, settings.autoCapture);
    try {
      const created = await storeTurns(settings, agentId, turns, { sessionId, sessionKey: ctx?.sessionKey });
      logger?.info?.(`tribal-memory: captured ${created} new of ${turns.length} turns of session ${sessionId}`);
    } catch (error) {
      logger?.warn?.(`tribal-memory: automatic capture skipped: ${error.message}`);
    }
  };
}
