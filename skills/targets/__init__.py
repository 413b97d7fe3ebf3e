"""Serving targets: where the model runs (the port is skills/targets/port.py; Cloud Run is the first)."""
