"""Judging: prompts, the one structured-output loop, verdict shapes and parsing, grading, panels.

May import `spec`, `dataset`, `models`, `scoring`, `errors` and `datatypes`.
"""
