"""The bot's own log lines: JSON that Cloud Logging reads (severity, message), secrets redacted first,
including in tracebacks."""

from __future__ import annotations

import io
import json
import logging

from bot.log_format import JsonFormatter

HF = "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ012345"
SLACK = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"


def _capture() -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger(f"test-json-{id(stream)}")
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    return logger, stream


def test_log_lines_are_json_with_severity_and_no_secrets() -> None:
    logger, stream = _capture()
    logger.warning("deploy used token %s and slack %s", HF, SLACK, extra={"trace": "projects/p/traces/abc"})
    entry = json.loads(stream.getvalue())
    assert entry["severity"] == "WARNING"
    assert HF not in entry["message"] and SLACK not in entry["message"]
    assert "[REDACTED:" in entry["message"]
    assert entry["logging.googleapis.com/trace"] == "projects/p/traces/abc"


def test_tracebacks_are_redacted_too() -> None:
    logger, stream = _capture()
    try:
        raise RuntimeError(f"upstream said Authorization: Bearer {HF}")
    except RuntimeError:
        logger.exception("call failed")
    entry = json.loads(stream.getvalue())
    assert entry["severity"] == "ERROR"
    assert "Traceback" in entry["message"] and "RuntimeError" in entry["message"]
    assert HF not in entry["message"]
