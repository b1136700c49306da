// What a tool answers when the server could not give its answer: memory-core's
// shapes (unavailable search, memory_get status "error"), with the server's
// own message, so the model can tell the user what is wrong and what to do.

import { ServerRefused } from "./http.js";

const CONFIG = "plugins.entries.tribal-memory.config";

/** A tool result the gateway hands to the model: the JSON text plus the value as details. */
export function toolResult(value) {
  return { content: [{ type: "text", text: JSON.stringify(value, null, 2) }], details: value };
}

const ACTIONS = {
  conflict: "Feedback is recorded once per search: run memory_search again and report the paths you used from its results.",
  not_found: "Use the retrievalId of a memory_search from this conversation.",
};

/**
 * Why a call failed, for the model: {kind, error, warning, action, code}.
 * kind "unavailable": memory cannot be used as configured (server down or
 * failing, key refused (401), key of another owner (403)); kind "refused":
 * this call was wrong (400, 404, 409, 413), memory itself works.
 * `error` is the server's message; `code` its error code or the HTTP status.
 */
export function describeFailure(error, { agentId, what }) {
  if (!(error instanceof ServerRefused)) {
    return {
      kind: "unavailable",
      error: error.message,
      warning: `Memory is unavailable: ${what}`,
      action: `Start the tribal-memory server (tribal-memory serve) or fix ${CONFIG}.baseUrl, then retry.`,
      code: "unavailable",
    };
  }
  const code = error.code ?? `http_${error.status}`;
  const message = `${error.message} (HTTP ${error.status})`;
  if (error.status === 401) {
    return {
      kind: "unavailable",
      error: message,
      warning: "Memory is unavailable: the tribal-memory server refused the API key.",
      action: `Set ${CONFIG}.apiKey to a valid key (tribal-memory keys create --owner ${agentId}), then restart the gateway.`,
      code,
    };
  }
  if (error.status === 403) {
    return {
      kind: "unavailable",
      error: message,
      warning: `Memory is unavailable: the API key may not act for agent ${agentId}.`,
      action: `Use a key created for this agent (tribal-memory keys create --owner ${agentId}) or set ${CONFIG}.agentId to the key's owner, then restart the gateway.`,
      code,
    };
  }
  return {
    kind: "refused",
    error: message,
    warning: "The tribal-memory server refused this call.",
    action: ACTIONS[code] ?? "Correct the arguments and retry.",
    code,
  };
}

/** memory_search's answer for a failure: memory-core's unavailable shape, or no results with why. */
export function searchFailure(failure) {
  const { kind, error, warning, action, code } = failure;
  if (kind === "unavailable") {
    return {
      results: [],
      disabled: true,
      unavailable: true,
      error,
      warning,
      action,
      code,
      debug: { warning, action, error },
    };
  }
  return { results: [], error, warning, action, code };
}

const GET_CODES = {
  unauthorized: "MEMORY_BACKEND_UNAUTHORIZED",
  forbidden: "MEMORY_BACKEND_FORBIDDEN",
  unavailable: "MEMORY_BACKEND_UNAVAILABLE",
};

/** memory_get's answer for a failure: memory-core's {path, text: "", status: "error", code, error}. */
export function getFailure(failure, path) {
  return {
    path,
    text: "",
    status: "error",
    code: GET_CODES[failure.code] ?? "MEMORY_READ_FAILED",
    error: failure.error,
    warning: failure.warning,
    action: failure.action,
  };
}

/** A write tool's answer for a failure: `{[flag]: false, error, warning, action, code}`, plus
 * `disabled`/`unavailable` when memory cannot be used. */
export function writeFailure(failure, flag) {
  const { kind, error, warning, action, code } = failure;
  return {
    [flag]: false,
    ...(kind === "unavailable" ? { disabled: true, unavailable: true } : {}),
    error,
    warning,
    action,
    code,
  };
}
