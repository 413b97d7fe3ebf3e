"""Logs: fetch through the Logs port, redact (first, on raw text), condense, group into templates."""
