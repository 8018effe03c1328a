"""One HTTP connection: uvicorn's own (httptools) with a deadline on request heads and errors in JSON.

Uvicorn closes a keep-alive connection that stays idle `timeout_keep_alive` seconds after an answer,
but its timer stops at the first byte, and none runs before the first request: a client that connects
and says nothing, or sends a head a byte at a time, would hold its connection forever. Here the same
timeout also runs from the moment the connection opens and from a request's first byte until its head
is complete; the body then has the app's --body-timeout. And malformed HTTP, which uvicorn answers
with a plain-text 400, gets the server's JSON error shape.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .protocol import ApiError


class Connection(HttpToolsProtocol):
    """uvicorn's HttpToolsProtocol, closed when a request head is not whole `timeout_keep_alive` seconds after
    the connection opened or the head began."""

    head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # as uvicorn's
        super().connection_made(transport)
        self.expect_head()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.expect_head()

    def on_headers_complete(self) -> None:
        self.head_arrived()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self.head_arrived()
        super().connection_lost(exc)

    def expect_head(self) -> None:
        self.head_arrived()
        self.head_deadline = self.loop.call_later(self.timeout_keep_alive, self.timeout_keep_alive_handler)

    def head_arrived(self) -> None:
        if self.head_deadline is not None:
            self.head_deadline.cancel()
            self.head_deadline = None

    def send_400_response(self, msg: str) -> None:
        body = ApiError(400, f"malformed HTTP: {msg}", code="invalid_http").body()
        head = f"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
        self.transport.write(head.encode() + b"connection: close\r\n\r\n" + body)
        self.transport.close()
