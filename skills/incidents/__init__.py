"""Incidents: the pipeline from alert to resolved thread (records, threads, outbox, investigation, what changed,
lifecycle, postmortem) and the chat port it is told through (chat.py)."""
