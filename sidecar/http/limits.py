"""Request body size limit: 413 `body_too_large` before a large body is read whole.

Neither uvicorn nor FastAPI bounds a request body; without this a single request
could make the process buffer and parse gigabytes. A declared Content-Length over
the limit is refused before anything is read; a chunked body is counted as it
arrives and refused as soon as it passes the limit.
"""

from __future__ import annotations

from fastapi import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sidecar.errors import RequestTooLarge


def too_large(max_bytes: int) -> dict[str, object]:
    return RequestTooLarge(reasons=[f"request body above {max_bytes} bytes"]).body()


class BodyTooLarge(HTTPException):
    # An HTTPException (FastAPI's: its detail may be an object), so FastAPI's body
    # reading passes it on (any other error there becomes a 400) and the app's
    # handler answers it in the usual Problem shape.
    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, detail=too_large(max_bytes))


class BodySizeLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await JSONResponse(too_large(self.max_bytes), status_code=413)(scope, receive, send)
            return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        await self.app(scope, counted, send)
