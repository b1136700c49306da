// The memory runtime OpenClaw asks for `openclaw status` and its memory manager.

import { request } from "./http.js";

const PROVIDER = "tribal-memory";

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

/**
 * `{manager}` for `agentId` from the owner-scoped GET /v1/stats/owner (any
 * key may read its own owner's counts), or `{manager: null, error}` with the
 * server's message when it cannot be read.
 */
export async function openManager(settings, agentId) {
  try {
    const stats = await request(settings, "GET", `/v1/stats/owner?owner=${encodeURIComponent(agentId)}`, { agentId });
    const snapshot = {
      model: stats.embedding_model,
      ftsIndexed: stats.fts_indexed === true,
      chunks: (stats.memories ?? 0) + (stats.shared ?? 0),
      files: stats.documents ?? 0,
    };
    return { manager: createManager(settings, agentId, snapshot) };
  } catch (error) {
    return { manager: null, error: error.message };
  }
}
