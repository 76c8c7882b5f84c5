"""Acknowledging what was read: the 997 (answer.py), its error codes, the loop a segment sits
in, and what a 997 says read back."""
