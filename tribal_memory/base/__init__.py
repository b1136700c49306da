"""The base layer: data shapes, errors, settings, input checks and the SQL tables.

Nothing here imports another tribal_memory package. Modules: :mod:`.models`
(memories, hits, relations), :mod:`.errors` (each with its HTTP status),
:mod:`.config` (``Settings``, the one reader of the environment),
:mod:`.validation`, :mod:`.paths` (the workspace path rule of documents and
``memory_get``), :mod:`.db` (engine, migrations, locks, change counters),
:mod:`.tables` (the learned and bookkeeping tables) and
:mod:`.generation_triggers` (the SQL triggers that count changes).
"""
