// The plugin's settings: plugins.entries.tribal-memory.config over the defaults.

export const DEFAULTS = Object.freeze({
  baseUrl: "http://127.0.0.1:18960",
  timeoutMs: 10_000,
  maxResults: 6,
  minScore: 0.02, // calibrated relevance (`tribal-memory bench calibration`): keep what may answer
  captureTool: true,
  autoRecall: Object.freeze({
    enabled: true,
    topK: 3,
    minScore: 0.08, // the unasked recall block abstains
    includeNeighbors: true,
    timeoutMs: 3_000,
    scope: "long-term",
  }),
  autoCapture: Object.freeze({
    enabled: true,
    minChars: 15,
    maxChars: 4_000,
    timeoutMs: 10_000,
  }),
});

export function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function positiveNumber(value, fallback) {
  return typeof value === "number" && Number.isFinite(value) && value > 0 ? value : fallback;
}

function text(value) {
  return typeof value === "string" && value.trim() ? value.trim() : undefined;
}

/**
 * The settings from a raw plugin config (anything: unknown or wrong-typed
 * fields fall back to DEFAULTS). Returns {baseUrl, apiKey?, agentId?,
 * timeoutMs, maxResults, minScore, captureTool, autoRecall: {...},
 * autoCapture: {enabled, minChars, maxChars, timeoutMs}}; never throws.
 */
export function resolveSettings(raw) {
  const config = isObject(raw) ? raw : {};
  const recall = isObject(config.autoRecall) ? config.autoRecall : {};
  const capture = isObject(config.autoCapture) ? config.autoCapture : {};
  return {
    baseUrl: (text(config.baseUrl) ?? DEFAULTS.baseUrl).replace(/\/+$/, ""),
    apiKey: text(config.apiKey),
    agentId: text(config.agentId),
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
      scope: recall.scope === "all" ? "all" : DEFAULTS.autoRecall.scope,
    },
    autoCapture: {
      enabled: capture.enabled !== false,
      minChars: positiveNumber(capture.minChars, DEFAULTS.autoCapture.minChars),
      maxChars: positiveNumber(capture.maxChars, DEFAULTS.autoCapture.maxChars),
      timeoutMs: positiveNumber(capture.timeoutMs, DEFAULTS.autoCapture.timeoutMs),
    },
  };
}
