"""A batch's way through the pipeline, pure: chunks, work messages and their queues, leases,
the settlement plan, units of work, lineage and outcome events."""
