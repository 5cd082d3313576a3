"""Untrusted text made safe where it leaves or enters: the terminal, CSV cells, unpaired surrogates.

Shared by every layer, like `errors`: may import nothing else of the package.
"""
