"""The simulator (docs/design.md): a simulated runtime replayed through the same policies the adapter serves."""
