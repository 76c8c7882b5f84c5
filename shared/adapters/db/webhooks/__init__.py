"""What producers hear back (docs/api.md#webhooks): endpoints and their
secrets, the events settlement writes, their deliveries and attempts."""
