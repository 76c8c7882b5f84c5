"""Previews (docs/api.md#previews): the money before it moves, writing nothing."""
