"""Server-side request latency per route template (whose_request_seconds), and
how long the server has been without a request in flight (`Traffic`).

A pure ASGI middleware, so it adds no per-request task: it reads the matched
route's template after the app has answered (Starlette's router leaves it in
the scope), never the concrete path, which would put record ids in labels.
"""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sidecar import metrics


class Traffic:
    """Requests in flight, and when the last one ended. The embedded store waits for
    a quiet server before work that stalls the whole process (store/edge.py)."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.last_ended = time.monotonic()

    def quiet_for(self) -> float:
        return 0.0 if self.in_flight else time.monotonic() - self.last_ended


class RequestTimer:
    def __init__(self, app: ASGIApp, traffic: Traffic | None = None) -> None:
        self.app = app
        self.traffic = traffic or Traffic()

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

        # Probes and scrapes go to the operations listener (http/ops.py): all of this is traffic.
        self.traffic.in_flight += 1
        try:
            await self.app(scope, receive, sent)
        finally:
            self.traffic.in_flight -= 1
            self.traffic.last_ended = time.monotonic()
            route = getattr(scope.get("route"), "path", "unmatched")
            metrics.REQUEST_SECONDS.labels(scope["method"], route, str(status)).observe(
                time.perf_counter() - started
            )
