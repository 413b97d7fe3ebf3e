"""Real adapters for the ports in skills/ports.py."""
