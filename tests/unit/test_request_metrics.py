"""`Traffic`, as the request middleware keeps it: what the embedded store's
optimizer waits out (store/edge.py)."""

from __future__ import annotations

import asyncio

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from sidecar.http.request_metrics import RequestTimer, Traffic


class App:
    """/slow notes the in-flight count it runs under, then waits to be released;
    /boom fails."""

    def __init__(self) -> None:
        self.traffic = Traffic()
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.seen: list[int] = []
        app = Starlette(
            routes=[
                Route("/slow", self.slow),
                Route("/boom", self.boom),
            ]
        )
        transport = httpx.ASGITransport(
            app=RequestTimer(app, self.traffic), raise_app_exceptions=False
        )
        self.http = httpx.AsyncClient(transport=transport, base_url="http://sidecar")

    async def slow(self, _: Request) -> PlainTextResponse:
        self.seen.append(self.traffic.in_flight)
        self.entered.set()
        await self.release.wait()
        return PlainTextResponse("done")

    async def boom(self, _: Request) -> PlainTextResponse:
        raise RuntimeError("handler failed")


async def test_requests_in_flight_are_traffic_until_they_end_even_when_they_fail() -> None:
    app = App()
    pending = asyncio.create_task(app.http.get("/slow"))
    await asyncio.wait_for(app.entered.wait(), timeout=5)
    assert app.seen == [1]
    assert app.traffic.quiet_for() == 0.0
    app.release.set()
    assert (await pending).status_code == 200
    assert app.traffic.in_flight == 0
    assert (await app.http.get("/boom")).status_code == 500
    assert app.traffic.in_flight == 0
    await asyncio.sleep(0.05)
    assert app.traffic.quiet_for() >= 0.05
