"""Writing benchmarks: `new` (a benchmark from scratch, or a variant) and `localize` (translate a benchmark's data).

May import `judge`, `stats`, `store`, `spec`, `dataset`, `scoring`, `models`, `errors` and `datatypes`.
"""
