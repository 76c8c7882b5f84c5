"""The webhooks component (``settleq worker --queues webhooks``,
docs/architecture.md#webhooks): fans events out to endpoints and delivers
them from the ``<prefix>.webhooks`` queue, never in settlement's way."""
