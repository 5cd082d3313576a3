"""Evaluation shapes as strategies: how a reply comes to be (a single reply, a scripted or a simulated
conversation) and how it is judged (criteria, a score on a scale, a pairwise comparison), one module per
shape and one registry (registry.py) that maps a spec's names to them.

May import `judge`, `stats`, `store`, `dataset`, `spec`, `models`, `scoring`, `errors`, `datatypes`, `records`
and `text`. Everything from `results`, `validity` and `authoring` up may ask it.
"""
