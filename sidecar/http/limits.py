"""Request body size limit: 413 `body_too_large` before a large body is read whole.

Neither uvicorn nor FastAPI bounds a request body; without this a single request
could make the process buffer and parse gigabytes. A declared Content-Length over
the limit is refused before anything is read; a chunked body is counted as it
arrives and refused as soon as it passes the limit. Both are RequestTooLarge, answered
as every refusal is (http/refusals.py): raised into the app as the body arrives, or,
before the app is asked anything, answered here by the same mapping.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sidecar.errors import RequestTooLarge, WhoseError


def too_large(max_bytes: int) -> RequestTooLarge:
    return RequestTooLarge(reasons=[f"request body above {max_bytes} bytes"])


class BodySizeLimit:
    def __init__(
        self, app: ASGIApp, max_bytes: int, respond: Callable[[str, WhoseError], Response]
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.respond = respond

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            refusal = self.respond(scope["path"], too_large(self.max_bytes))
            await refusal(scope, receive, send)
            return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise too_large(self.max_bytes)
            return message

        await self.app(scope, counted, send)
