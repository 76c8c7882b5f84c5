"""The settlement domain: money, keys, signing, chunking, settlement and the kinds.

Pure code over plain values: no I/O, no framework, no connection. An
import-linter contract (pyproject.toml) keeps it so.
"""
