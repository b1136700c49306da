"""Operations on a whole store.

Backup and restore (:mod:`.backup`), consistency checks and repair
(:mod:`.maintenance`), export and import (:mod:`.transfer`).
"""
