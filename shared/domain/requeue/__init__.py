"""Requeueing dead letters, pure: whether a letter would only be dead-lettered again, and a
requeued line run alone."""
