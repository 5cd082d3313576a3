"""Results across runs: the leaderboard, its intervals and paired differences, rescoring.

May import `stats`, `store`, `judge`, `spec`, `dataset`, `scoring`, `models`, `errors` and `datatypes`.
"""
