"""Webhook endpoints and their delivery log on the wire (docs/api.md#webhooks)."""
