"""Observe: status, model metrics and health, test queries, Cloud Monitoring series."""
