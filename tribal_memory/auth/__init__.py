"""Who is asking: API keys (:mod:`.keys`) and a caller's scoping rules (:mod:`.policy`)."""
