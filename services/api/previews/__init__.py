"""Previews (docs/api.md#previews): what settlement would do, writing nothing."""
