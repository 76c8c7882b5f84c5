"""Reading the ledger out: the feed, a document's lines and identities, periods, the close,
balances and statements."""
