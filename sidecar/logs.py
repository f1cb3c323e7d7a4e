"""Logging set-up: one JSON object per line for a log collector, plain lines for a
person at a terminal (WHOSE_LOG_FORMAT: auto, json, text), uvicorn's access log included.

Fields passed with `extra=` (decision_id, asker, route ...) become JSON keys, so
a disclosure can be followed from the access log to the audit entry.
"""

from __future__ import annotations

import logging
import sys

from pythonjsonlogger.json import JsonFormatter

from sidecar.settings import Settings


def configure(settings: Settings) -> None:
    handler = logging.StreamHandler()
    if as_json(settings.log_format, sys.stderr.isatty()):
        handler.setFormatter(
            JsonFormatter(
                "{levelname}{name}{message}",
                style="{",
                rename_fields={"levelname": "level", "name": "logger"},
                timestamp=True,  # ISO 8601, UTC
            )
        )
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level.upper())
    # uvicorn's loggers propagate to the root handler instead of their own.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
    # httpx logs every request at INFO: with the server store, every Qdrant call.
    logging.getLogger("httpx").setLevel(logging.WARNING)


def as_json(log_format: str, terminal: bool) -> bool:
    """JSON unless asked for text, or left to "auto" with a person reading (a terminal)."""
    return log_format == "json" or (log_format == "auto" and not terminal)
