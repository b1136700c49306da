"""Export and import: move memories, relations and learned data between instances.

An export is a JSON-lines file (:mod:`.records` describes the format):
a header naming the embedding model, every memory with its vector, the
relations, the rows of the learned tables, and an end record with counts.
:func:`export_lines` streams it (:func:`write_export_file` writes it to a
file, never half written); :func:`import_source` checks a whole file
before writing any of it, keeps ids and timestamps, re-embeds when the file
comes from another embedding model, and skips what is already there.
"""

from tribal_memory.base.transfer import ImportResult, OnConflict, Source, TransferCounts
from tribal_memory.ops.transfer.exporter import export_lines, write_export, write_export_file
from tribal_memory.ops.transfer.importer import import_source
from tribal_memory.ops.transfer.records import EXCLUDED_TABLES, FORMAT, MEDIA_TYPE, VERSION

__all__ = [
    "EXCLUDED_TABLES",
    "FORMAT",
    "MEDIA_TYPE",
    "VERSION",
    "ImportResult",
    "Source",
    "TransferCounts",
    "export_lines",
    "import_source",
    "OnConflict",
    "write_export",
    "write_export_file",
]
