"""Errors a user may see: what happened, and what to do next. Never a traceback."""

from __future__ import annotations

from typing import Any

from skills.text import shorten


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


def explain_validation(exc: Any, flag_style: bool = True, skip: tuple[str, ...] = ("params",)) -> str:
    """A pydantic ValidationError as sentences that name the field, in the bot's words, never pydantic's
    ("Value error, ...", "Input should be ..."). `flag_style` names fields as command-line flags (--max-model-len);
    location parts in `skip` (the wrapper a model is validated under) are left out."""
    return "; ".join(explain_error(err, flag_style, skip) for err in exc.errors()) + "."


def explain_error(err: Any, flag_style: bool = True, skip: tuple[str, ...] = ("params",)) -> str:
    """One pydantic error (an item of ValidationError.errors()) as one sentence without a final period."""
    loc = [str(p) for p in err.get("loc", ()) if not isinstance(p, int) and str(p) not in skip]
    name = ".".join(loc)
    field = (f"--{name.replace('_', '-')}" if flag_style else name) if name else "the input"
    ctx = err.get("ctx") or {}
    given = err.get("input")
    # what was given, quoted short: a megabyte of input is not echoed back
    shown = f" (got {shorten(repr(given), 60)})" if given is not None and not isinstance(given, dict | list) else ""
    kind = err.get("type", "")
    if kind in ("value_error", "assertion_error"):
        reason = str(ctx.get("error", err.get("msg", ""))).strip().rstrip(".")
        for prefix in ("Value error, ", "Assertion failed, "):
            reason = reason.removeprefix(prefix)
        reason = shorten(reason, 300)  # a validator's reason may quote the value
        return f"{field}: {reason}" if name else reason
    what = _PHRASES.get(kind)
    if what is None:
        msg = str(err.get("msg", "is not valid")).rstrip(".")
        what = msg[0].lower() + msg[1:] if msg else "is not valid"
        what = what.replace("input should be", "must be")
        return f"{field} {what}{shown}"
    try:
        return f"{field} {what.format(**ctx)}{shown}"
    except (KeyError, IndexError):
        return f"{field} is not valid{shown}"


_PHRASES = {
    "missing": "is required",
    "extra_forbidden": "is not a known option",
    "greater_than": "must be greater than {gt}",
    "greater_than_equal": "must be at least {ge}",
    "less_than": "must be less than {lt}",
    "less_than_equal": "must be at most {le}",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_parsing": "must be a number",
    "bool_parsing": "must be true or false",
    "string_pattern_mismatch": "is not in the expected form",
    "string_too_short": "is too short",
    "string_too_long": "is longer than {max_length} characters",
    "too_short": "needs at least {min_length} item(s)",
    "too_long": "takes at most {max_length} item(s)",
    "literal_error": "must be one of {expected}",
    "enum": "must be one of {expected}",
}


# Slack Web API error codes (https://docs.slack.dev/reference/methods/chat.postMessage#errors) -> what to do.
_SLACK_HINTS = {
    "not_in_channel": "Invite the bot to the channel (`/invite @gemma-sre`), then try again.",
    "channel_not_found": "Check the channel (SLACK_ALERTS_CHANNEL for alerts) and invite the bot to it.",
    "is_archived": "The channel is archived: unarchive it or pick another one.",
    "invalid_auth": "Check SLACK_BOT_TOKEN (the xoxb- token of the installed app).",
    "not_authed": "Set SLACK_BOT_TOKEN (the xoxb- token of the installed app).",
    "token_revoked": "The token was revoked: reinstall the app and update SLACK_BOT_TOKEN.",
    "account_inactive": "The token was revoked: reinstall the app and update SLACK_BOT_TOKEN.",
    "missing_scope": "Add the scope in the app's OAuth & Permissions (see slack-app-manifest.yaml), reinstall.",
    "ratelimited": "Slack is rate limiting the bot: try again in a minute.",
}
_SLACK_DEFAULT_HINT = "Check SLACK_BOT_TOKEN and the app's scopes."


def failure_class(exc: BaseException) -> tuple[str, str] | None:
    """What kind of failure an unexpected exception is, from its class and module (this module imports no client
    library): (what happened, what to do), or None. The chain (`raise ... from`, context) is searched too."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        mod, name = type(e).__module__, type(e).__name__
        text = str(e)[:160].rstrip(". ")
        if mod.startswith("redis"):
            if name in ("ConnectionError", "TimeoutError", "BusyLoadingError") or "connect" in text.lower():
                refused = "refused" in text.lower() or "Error 111 " in text
                return (
                    f"Redis {'refused the connection' if refused else 'did not answer'} ({text})",
                    "Start Redis or correct REDIS_URL (unset it to use the in-process store in the console).",
                )
            return (f"Redis refused a command ({name}: {text})", "Check the Redis server's log.")
        if mod.startswith("google.auth") and name in ("DefaultCredentialsError", "RefreshError"):
            return (
                "Google credentials are missing or expired",
                "Run `gcloud auth application-default login` (or set GOOGLE_APPLICATION_CREDENTIALS).",
            )
        if mod.startswith("slack_sdk") and name == "SlackApiError":
            error = str(getattr(getattr(e, "response", None), "get", lambda *_: None)("error") or "")
            return (f"Slack refused the call ({error or text[:120]})", _SLACK_HINTS.get(error, _SLACK_DEFAULT_HINT))
        if (mod.startswith("aiohttp") and "Connect" in name) or name == "ServerDisconnectedError":
            return (f"Slack could not be reached ({text})", "Check the network and SLACK_API_URL.")
        if isinstance(e, ConnectionRefusedError):
            return (f"A connection was refused ({text})", "Check that the service it names is running.")
        e = e.__cause__ or e.__context__
    return None
