// One request to the tribal-memory server, with its failures sorted in two kinds.

import { isObject } from "./settings.js";

/** The server could not be reached, timed out, or failed (5xx): memory is unavailable. */
export class ServerUnavailable extends Error {}

/**
 * The server refused the call (4xx). `status` is the HTTP status, `code` the
 * server's error code (unauthorized, forbidden, conflict, invalid_input, ...),
 * `message` the server's own detail.
 */
export class ServerRefused extends Error {
  constructor(message, status, code) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/**
 * `method path` on the server as `agentId` (X-Agent-Id) with the API key, if
 * any; `body` is sent as JSON. Resolves to the parsed JSON answer of a 2xx.
 * Throws ServerUnavailable (unreachable, over `timeoutMs`, 5xx, not JSON),
 * ServerRefused (4xx, with the server's message), or the abort error of
 * `signal` when the caller gave up.
 */
export async function request(settings, method, path, { agentId, body, timeoutMs, signal } = {}) {
  const headers = { accept: "application/json" };
  if (body !== undefined) headers["content-type"] = "application/json";
  if (agentId) headers["x-agent-id"] = agentId;
  if (settings.apiKey) headers.authorization = `Bearer ${settings.apiKey}`;
  const limit = timeoutMs ?? settings.timeoutMs;
  const timeout = AbortSignal.timeout(limit);
  let response;
  try {
    response = await fetch(`${settings.baseUrl}${path}`, {
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
