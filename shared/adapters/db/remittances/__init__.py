"""Remittances and deductions in the database (docs/architecture.md#remittances-and-deductions)."""
