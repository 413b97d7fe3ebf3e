"""The model client and its tool-calling loop (see loop.py); `Agent` is what handlers and workers use."""

from bot.agent.agent import Agent, Analysis, Answer

__all__ = ["Agent", "Analysis", "Answer"]
