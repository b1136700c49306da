"""The relation graph between memories: edges and scoped queries over them.

Modules: :mod:`.relations` (edges), :mod:`.queries` (neighbours,
intersection, neighbourhoods), scoped to what a caller may see.
"""
