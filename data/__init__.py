"""Sample data sets shipped with rubric-engine (installed as rubric_engine.data)."""
