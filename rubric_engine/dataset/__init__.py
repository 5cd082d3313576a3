"""Benchmark data: loading and validating rows, whole-file checks, downloads pinned by sha256.

May import `spec`, `errors` and `datatypes`.
"""
