"""What an operator repairs: dead letters, disputes, and the audit log of who did what."""
