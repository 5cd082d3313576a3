"""One benchmark run: settings, the pipeline, the run's identity, records, the journal, the summary.

The only layer that drives a run end to end. May import every package below it: `report`, `results`,
`validity`, `judge`, `stats`, `store`, `spec`, `dataset`, `scoring`, `models`, `errors`, `datatypes`.
"""
