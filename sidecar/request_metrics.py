"""Server-side request latency per route template (whose_request_seconds).

A pure ASGI middleware, so it adds no per-request task: it reads the matched
route's template after the app has answered (Starlette's router leaves it in
the scope), never the concrete path, which would put record ids in labels.
"""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sidecar import metrics


class RequestTimer:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sent(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sent)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            metrics.REQUEST_SECONDS.labels(scope["method"], route, str(status)).observe(
                time.perf_counter() - started
            )
