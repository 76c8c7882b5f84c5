"""Jobs on the wire: the routes, a job's page, its lines as items and as CSV."""
