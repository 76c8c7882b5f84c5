"""Dead letters on the wire: the routes, a letter's excerpt, and requeueing."""
