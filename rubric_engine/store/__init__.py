"""Run directories on disk: the file layout (every file name in one place) and reading runs back.

May import `spec`, `dataset`, `scoring`, `models`, `errors` and `datatypes`.
"""
