"""The outbox relay: its own process, publishing committed outcome events."""
