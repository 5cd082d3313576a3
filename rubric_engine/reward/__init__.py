"""Rubric scores as rewards for RL training: the spec's own question score for each rollout, behind the
interfaces TRL, verl and OpenRLHF call (a Python reward, `compute_score`, an HTTP reward server).

May import run/ (the settings, the plan, the run's loading of spec and data) and every layer below it; the
command line (cli/) builds a reward from key=value overrides and serves it, and imports this package.
"""
