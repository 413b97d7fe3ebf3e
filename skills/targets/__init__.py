"""Serving targets: where the model runs (the port is skills/targets/port.py; Cloud Run and Cloud TPU implement
it) and what every target shares: the plan, its inputs and preflight outcome, the canary's vocabulary."""
