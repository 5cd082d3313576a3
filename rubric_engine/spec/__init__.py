"""Benchmark specs: the schema of `benchmark.yaml`, its cross-field rules, and reading spec files.

May import `scoring` (formula names, aggregation), `errors` and `datatypes`.
"""
