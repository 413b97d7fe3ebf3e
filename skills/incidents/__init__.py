"""Incidents: incident state and its storage in Redis (threads, outbox, leases)."""
