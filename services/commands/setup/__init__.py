"""What a stack is set up with: contracts, trading partners, credentials (keys and tokens) and
webhook endpoints."""
