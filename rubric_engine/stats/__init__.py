"""Statistics over scores: bootstrap, hierarchical bootstrap, sampling, lengths, agreement, noise.

Pure: no I/O or UI library is loaded by importing any module here (tests/project/test_structure.py).
May import `scoring`, `errors` and `datatypes` (`spec` only for types).
"""
