// tribal-memory as OpenClaw's memory slot.
//
// The agent's memory tools (memory_search, memory_get, memory_feedback,
// memory_capture, and memory_list/update/delete to correct its own memories) are forwarded to a tribal-memory server over HTTP, as the
// agent the turn runs for (X-Agent-Id). At the start of each user turn the
// prompt is sent to POST /v1/context and the <knowledge-graph> block it
// returns is put in front of the prompt; at the end of each run the
// conversation's turns are captured (autoCapture). The memory capability
// replaces memory-core's "Memory Recall" prompt section (it asks the model to
// report what it used through memory_feedback) and reports the server in
// `openclaw status`.
//
// Plain ES modules, no build step, no dependencies beyond Node's fetch:
//   lib/settings.js  the plugin config over its defaults
//   lib/http.js      requests to the server, failures as ServerUnavailable / ServerRefused
//   lib/answers.js   what tools answer when the server fails or refuses (memory-core's shapes)
//   lib/paths.js     memory-core's rule for which paths memory_get serves
//   lib/tools.js     the seven tools
//   lib/recall.js    the prompt section and the start-of-turn <knowledge-graph> block
//   lib/capture.js   autoCapture on agent_end
//   lib/status.js    the memory runtime behind `openclaw status`

import { definePluginEntry } from "openclaw/plugin-sdk/plugin-entry";
import { captureHandler } from "./lib/capture.js";
import { buildPromptSection, promptOf, recallFor } from "./lib/recall.js";
import { resolveSettings } from "./lib/settings.js";
import { openManager } from "./lib/status.js";
import { MANAGE_TOOL_NAMES, TOOL_NAMES, createTools } from "./lib/tools.js";

export { resolveSettings };

export default definePluginEntry({
  id: "tribal-memory",
  name: "Tribal Memory",
  description:
    "Memory slot backed by a tribal-memory server: memory tools over HTTP, automatic recall and capture, and retrieval that learns from the agent's feedback.",
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

    const names = [...(settings.captureTool ? TOOL_NAMES : TOOL_NAMES.slice(0, 3)), ...MANAGE_TOOL_NAMES];
    api.registerTool((ctx) => createTools(api, ctx), { names });

    if (settings.autoRecall.enabled) {
      api.on("before_prompt_build", async (event, ctx) => {
        if (ctx?.trigger && ctx.trigger !== "user") return undefined;
        const agentId = settings.agentId ?? ctx?.agentId ?? "main";
        const block = await recallFor(settings, agentId, promptOf(event), api.logger, ctx?.sessionId);
        ctx?.hookInvocation?.assertActive?.();
        return block ? { prependContext: block } : undefined;
      });
    }
    if (settings.autoCapture.enabled) {
      api.on("agent_end", captureHandler(settings, api.logger));
    }
  },
});
