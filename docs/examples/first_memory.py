from pathlib import Path

from tribal_memory import MemoryInput, MemoryService, SearchFilters, Settings

alice = SearchFilters(owner="alice")
with MemoryService(Settings(data_dir=Path("./data"))) as memory:
    memory.capture(MemoryInput("Alice prefers green tea over coffee", owner="alice"))
    result = memory.recall_with_feedback("what does alice drink?", filters=alice)
    for hit in result.hits:
        print(hit.rank, round(hit.score, 3), hit.memory.content)
    memory.record_usage_feedback(result.retrieval_id, [result.hits[0].memory.memory_id])
