"""Bench: the load generator, sweep previews and reports."""
