"""What a person sees: console progress and tables, leaderboard files, charts, HTML pages.

May import `results`, `validity` and everything below them; never `run` or `cli`.
"""
