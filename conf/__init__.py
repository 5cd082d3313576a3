"""Hydra configs shipped with rubric-engine (installed as rubric_engine.conf)."""
