"""Errors a user may see: what happened, and what to do next. Never a traceback."""

from __future__ import annotations


class UserFacingError(Exception):
    """An error whose message is fit for Slack: one sentence of what happened and a hint of what to do."""

    def __init__(self, message: str, hint: str = "", mentions: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        # Chat user ids the message names as <@ID> (from our own records, never from model or log text):
        # the Slack renderer keeps exactly these as mentions and escapes everything else.
        self.mentions = mentions

    def __str__(self) -> str:
        return f"{self.message} {self.hint}".strip()


class CloudUnavailable(UserFacingError):
    """No Google credentials / project: cloud-backed commands cannot run, the rest still can."""


class NotFound(UserFacingError):
    pass


class InvalidInput(UserFacingError):
    pass


class TransientCloudError(UserFacingError):
    """A cloud API call failed in a way that may pass (429, 5xx, timeout) after the adapter's own retries:
    a watcher with time left keeps watching instead of reporting a failure."""
