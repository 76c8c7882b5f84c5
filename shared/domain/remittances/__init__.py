"""Remittances and deductions (issue 53): what a payer actually paid and took
off, and the match of each deduction to the settled accruals it claims. Pure
domain: reading an 820 into a remittance, classing its deductions, and the
matching rule; the ledger rows, the API and the worker come on top."""
