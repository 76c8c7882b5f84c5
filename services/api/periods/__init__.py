"""Periods, balances, the journal and statements on the wire (docs/api.md#periods-and-the-close)."""
