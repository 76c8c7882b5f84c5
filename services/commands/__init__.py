"""The client commands of ``settleq`` (docs/operations.md#commands): batches, dead letters and the
demo, each a typer app that ``services.commands.cli`` merges into its own."""
