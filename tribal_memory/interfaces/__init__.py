"""How the world reaches the service.

HTTP (:mod:`.api`), the command line (:mod:`.cli`), MCP (:mod:`.mcp`), the
agent memory-slot tools (:mod:`.tools`, :mod:`.graph_tool`) and the context
block (:mod:`.context`). Nothing below this package imports it.
"""
