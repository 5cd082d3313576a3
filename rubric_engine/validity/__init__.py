"""Is the judge right? Review items and sheets, human labels, judge-human agreement, self-preference audit.

May import `stats`, `store`, `judge`, `spec`, `dataset`, `scoring`, `models`, `errors` and `datatypes`.
"""
