"""The ledger's read side: what reads the ledger out rather than writing it
(the feed, in commit order)."""
