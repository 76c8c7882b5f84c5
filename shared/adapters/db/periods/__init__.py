"""Booking periods, the close, balances and the journal (docs/api.md#periods-and-the-close)."""
