// memory-core's rule for what memory_get may read: MEMORY.md, USER.md,
// DREAMS.md and Markdown files under memory/, relative to the workspace.
// Bootstrap files (AGENTS.md, SOUL.md, ...) and anything outside are refused.

/** The path as memory-core compares it: leading "./" and "/" dropped, backslashes as "/". */
function normalized(path) {
  return path.trim().replace(/^[./]+/, "").replace(/\\/g, "/");
}

/**
 * Whether memory-core would serve `path` (a string) through memory_get: true
 * for MEMORY.md, USER.md, DREAMS.md (any case) and memory/**.md, with no ".."
 * segment; false otherwise.
 */
export function isMemoryPath(path) {
  if (typeof path !== "string") return false;
  const plain = normalized(path.replace(/#L\d+(-L\d+)?$/, ""));
  if (!plain || plain.split("/").includes("..")) return false;
  if (plain === "MEMORY.md" || plain === "USER.md" || plain.toLowerCase() === "dreams.md") return true;
  return plain.startsWith("memory/") && plain.endsWith(".md");
}

/**
 * The same rule as path patterns for the server (`paths` of memory_search and
 * POST /v1/context; `*` matches any characters, "/" included): results and
 * recalled notes are filtered on the server, so a search still fills
 * maxResults. A captured memory's path, memory/<id>.md, matches memory/*.md.
 */
export const MEMORY_PATH_PATTERNS = Object.freeze(["MEMORY.md", "USER.md", "DREAMS.md", "dreams.md", "memory/*.md"]);

/** memory-core's answer to a path it does not serve. */
export function pathNotAllowed(path) {
  return {
    path,
    text: "",
    status: "error",
    code: "MEMORY_PATH_NOT_ALLOWED",
    error: "path is not an allowed Markdown memory file",
  };
}
