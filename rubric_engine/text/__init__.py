"""Untrusted text made safe where it leaves or enters: the terminal, CSV cells, unpaired surrogates, and the
font list every HTML page draws its text with (Chinese never as boxes).

Shared by every layer, like `errors`: may import nothing else of the package.
"""
