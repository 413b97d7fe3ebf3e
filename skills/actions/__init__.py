"""Actions: one params model per write action; the agent's proposable subset is derived from it."""
