"""Cloud TPU v6e queued resources as a serving target (skills/targets/port.py)."""
