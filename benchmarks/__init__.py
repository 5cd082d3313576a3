"""Benchmark spec directories shipped with rubric-engine (installed as rubric_engine.benchmarks)."""
