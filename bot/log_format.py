"""JSON log lines that Cloud Logging understands (severity, message), with secrets redacted first."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

from skills.logs.redact import redact


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.exc_info:
            message += "\n" + self.formatException(record.exc_info)
        entry = {
            "severity": record.levelname if record.levelname != "WARN" else "WARNING",
            "message": redact(message),
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "logger": record.name,
        }
        trace = getattr(record, "trace", None)
        if trace:
            entry["logging.googleapis.com/trace"] = trace
        return json.dumps(entry, ensure_ascii=False)


def setup_logging(level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # Client libraries are chatty at INFO (every HTTP call); keep their warnings only.
    for noisy in ("httpx", "httpcore", "slack_bolt", "slack_sdk", "urllib3", "google", "openai"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(level)))
