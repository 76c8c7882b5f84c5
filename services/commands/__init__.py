"""The client commands of ``settleq`` (SPEC §6): batches, dead letters and the
demo, each a typer app that ``services.cli`` merges into its own."""
