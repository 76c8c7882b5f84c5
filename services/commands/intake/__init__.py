"""Batches in, outcomes out: submit (JSON, NDJSON and X12), status, gen, jobs and the outcome
events."""
