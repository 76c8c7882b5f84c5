"""What operators decide, do and manage: their tables (dispute resolutions, the audit log,
producer keys), the audit log's writer and the producer keys' store."""
