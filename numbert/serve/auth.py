"""Who may call the server: API keys (`Authorization: Bearer KEY`, as OpenAI's and TEI's clients send them).

    numbert serve --api-key "$KEY" --api-key-file /etc/numbert/keys

A request without a served key gets a 401 in OpenAI's error shape, before its body is read. /health and
/metrics stay open (a load balancer's probe, a Prometheus scrape) unless --protect-health; a CORS preflight
(OPTIONS) carries no key and is answered by the CORS layer outside this one. Keys are compared with
hmac.compare_digest against every served key, so the time taken tells nothing of how much of a key was
right or which key matched, and no key, right or wrong, ever reaches a log line or an answer.
"""

from __future__ import annotations

import hmac
from pathlib import Path

from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from .protocol import ApiError

OPEN_PATHS = ("/health", "/metrics")  # open unless --protect-health


class BearerAuth:
    """ASGI middleware: an HTTP request passes with one of `keys` as its Bearer token, or on an open path."""

    def __init__(self, app: ASGIApp, keys: list[str], open_paths: tuple[str, ...] = OPEN_PATHS):
        self.app = app
        self.keys = [key.encode() for key in keys]
        self.open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.open_paths or self.allowed(bearer_token(scope)):
            await self.app(scope, receive, send)
            return
        error = unauthorized(bearer_token(scope) is None)
        response = Response(error.body(), error.status, headers=error.headers, media_type="application/json")
        await response(scope, receive, send)

    def allowed(self, token: bytes | None) -> bool:
        """Whether `token` is one of the keys, each compared in constant time (all of them, whatever matches)."""
        if token is None:
            return False
        matches = [hmac.compare_digest(token, key) for key in self.keys]
        return any(matches)


def bearer_token(scope: Scope) -> bytes | None:
    """The token of the request's `Authorization: Bearer TOKEN` header, or None."""
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, token = value.partition(b" ")
            return token.strip() if scheme.lower() == b"bearer" else None
    return None


def unauthorized(missing: bool) -> ApiError:
    """The 401: what was wrong (never the key sent)."""
    message = (
        "no API key: send 'Authorization: Bearer YOUR_KEY'"
        if missing
        else "the API key sent is not one this server accepts"
    )
    return ApiError(401, message, code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"})


def read_keys(path: str | Path) -> list[str]:
    """The keys in a file, one a line (blank lines and lines starting with # skipped; a UTF-8 byte-order mark,
    which Windows editors write first, dropped); a ValueError naming the file (and the line, never the key)
    when it cannot be read, holds no key or a key a Bearer token cannot be."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"--api-key-file {path}: cannot read it ({e})") from None
    keys = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip() and not line.lstrip().startswith("#"):
            keys.append(checked_key(line.strip(), f"--api-key-file {path}, line {number}"))
    if not keys:
        raise ValueError(f"--api-key-file {path}: holds no key (one key a line)")
    return keys


def checked_key(key: str, where: str) -> str:
    """`key`, unless it is empty or holds anything but printable ASCII (a space, a byte-order mark, a control
    character: no client sends them in a Bearer token, so such a key would only ever answer 401): a ValueError
    naming `where`."""
    if not key or any(c.isspace() for c in key):
        raise ValueError(f"{where}: an API key must be non-empty, without spaces (the key is not shown)")
    odd = next((c for c in key if not "!" <= c <= "~"), None)
    if odd is not None:
        raise ValueError(
            f"{where}: an API key must be printable ASCII, as a Bearer token is; it holds U+{ord(odd):04X} "
            f"(the key is not shown)"
        )
    return key
