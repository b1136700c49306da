"""Benchmark harnesses behind ``tribal-memory bench`` (results go to ``benchmarks/``)."""
