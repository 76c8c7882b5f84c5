"""Previews (docs/api.md#previewing-a-batch): what settlement would do, writing nothing."""
