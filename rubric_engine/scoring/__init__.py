"""Scoring: per-question formulas, the formula registry and aggregation to headline numbers.

Pure functions over criteria and judge hits. May import only `rubric_engine.errors` and
`rubric_engine.datatypes`; loads no I/O or UI library (tests/project/test_structure.py).
"""
