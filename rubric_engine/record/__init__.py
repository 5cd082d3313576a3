"""The samples.jsonl record as typed values and the one codec that reads and writes it (issue #36).

May import: errors.py and records.py (the JSON layout the codec reads) only; every layer above reads a stored
record through `record.codec.decode` and its attributes, never by the JSON key names.
"""
