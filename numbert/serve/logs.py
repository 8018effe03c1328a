"""The server's log on stderr: an access line per request, as text (`INFO:     POST /embed 200 4.2 ms <id>`) or,
with `numbert serve --log-format json`, as one JSON object a line, like uvicorn's lines and the server's own.

An access line holds the request's time, method, path, status, duration_ms, client address, request
id (the client's `X-Request-Id` header, else a new one, sent back in the answer's `X-Request-Id`),
and for a request carrying inputs their number and tokens. Never its body, its query string or its
headers (so never an API key).
"""

from __future__ import annotations

import atexit
import copy
import json
import logging
import logging.handlers
import queue
import time
import uuid
from datetime import UTC, datetime

access = logging.getLogger("numbert.serve.access")
REQUEST_ID = "x-request-id"


class JsonFormatter(logging.Formatter):
    """A log record as one JSON object: time (UTC, ISO 8601), level, logger, message, and the record's
    `fields` (an access line's) if it has them."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            **getattr(record, "fields", {}),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


class HandOff(logging.handlers.QueueHandler):
    """Hands each record to the writer thread as it is: formatted and written there (`written_by_a_thread`)."""

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        return record  # the server's records carry strings and numbers only: safe to format later, in the writer


def written_by_a_thread(handler: logging.Handler) -> logging.Handler:
    """A handler that queues records for `handler`, run by a thread of its own, so that the event loop never
    formats a line or waits on stderr (a slow reader of the pipe would otherwise hold every request); the lines
    left are written at exit."""
    lines: queue.SimpleQueue = queue.SimpleQueue()
    writer = logging.handlers.QueueListener(lines, handler)
    writer.start()
    atexit.register(writer.stop)
    return HandOff(lines)


def uvicorn_log_config() -> dict:
    """uvicorn's logging configuration with its formatters replaced by JsonFormatter."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["formatters"] = {name: {"()": JsonFormatter} for name in config["formatters"]}
    return config


def access_log(app):
    """`app` (ASGI) writing an access line per HTTP request once it is answered."""

    async def logged(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        start = time.perf_counter()
        headers = dict(scope["headers"])
        request_id = headers.get(REQUEST_ID.encode(), b"").decode("latin-1")[:200] or uuid.uuid4().hex
        status = 500  # unless an answer starts

        async def send_with_id(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", []), (REQUEST_ID.encode(), request_id.encode())]
            await send(message)

        try:
            await app(scope, receive, send_with_id)
        finally:
            state = scope.get("state", {})
            client = scope.get("client")
            fields = {
                "method": scope["method"],
                "path": scope["path"],
                "status": status,
                "duration_ms": round((time.perf_counter() - start) * 1000, 3),
                "client": None if client is None else f"{client[0]}:{client[1]}",
                "request_id": request_id,
                **{k: state[k] for k in ("inputs", "tokens") if k in state},
            }
            access.info(
                "%s %s %d %.1f ms %s",
                scope["method"],
                scope["path"],
                status,
                fields["duration_ms"],
                request_id,
                extra={"fields": fields},
            )

    return logged
