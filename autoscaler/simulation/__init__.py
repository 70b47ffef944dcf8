"""The simulator (DESIGN §9): a simulated runtime replayed through the same policies the adapter serves."""
