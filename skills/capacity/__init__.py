"""Capacity: the model catalog (every number sourced), vLLM's KV accounting, fit, prices and cost, GPU quota,
image/version compatibility, and the planner's self-check against what vLLM printed at start-up."""
