"""Remittances and deductions over HTTP (docs/api.md#remittances-and-deductions)."""
