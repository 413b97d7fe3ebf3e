"""Surfaces, kept thin: parse input, call a skill, render its result (Block Kit or plain text)."""
