"""Reading a partner's X12 file, as sent, into its interchanges: the envelopes, the delimiters,
the scans and the lazily split sets."""
