"""One benchmark run: settings and the resolved plan, the pipeline, identity, records, the journal, the summary.

The only layer that drives a run end to end. May import every package below it: `report`, `results`,
`validity`, `judge`, `stats`, `store`, `spec`, `dataset`, `scoring`, `models`, `errors`, `datatypes`.
"""
