"""The operations listener: health, readiness and Prometheus metrics, on a port of
their own (`WHOSE_OPS_PORT`).

They are apart from the API on purpose. Metrics count decisions per reason,
cache hits, store calls: per-record facts that would let a caller of the API
tell a forbidden record from a missing one (docs/security.md). So the public
listener serves no metrics at all, and this one is for Prometheus and the
kubelet, reachable only where the deployment lets them reach it.
"""

from __future__ import annotations

import os

from fastapi import FastAPI
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from redis.exceptions import RedisError

from sidecar import __version__
from sidecar.errors import StoreUnavailable
from sidecar.http import console as console_pages
from sidecar.http import refusals
from sidecar.services import Services


def create_ops_app(api: FastAPI, console: bool = False) -> FastAPI:
    """The operations app for the API app `api` (whose services it checks); `console`:
    the security team's console (http/console.py) is served here too."""
    ops = FastAPI(title="whose operations", version=__version__, openapi_url=None)
    if console:
        ops.include_router(console_pages.router(lambda: getattr(api.state, "services", None)))
    registry = REGISTRY
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        # Several workers (workers.py): every scrape sums what each of them wrote.
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]

    @ops.get("/healthz")
    async def healthz() -> dict[str, str]:
        """The process is up (says nothing about its dependencies)."""
        return {"status": "ok"}

    @ops.get("/metrics", response_class=PlainTextResponse)
    async def prometheus_metrics() -> PlainTextResponse:
        return PlainTextResponse(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    @ops.get("/readyz")
    async def readyz() -> JSONResponse:
        """Ready when OPA and the store answer; Redis is reported, not required.

        Without Redis reads stay correct (no cache, audit spilled locally) and only
        writes wait: taking every replica out of the Service for it would turn a
        degraded sidecar into an outage.
        """
        svc: Services | None = getattr(api.state, "services", None)
        if svc is None:  # still starting (or stopping)
            return JSONResponse({"status": "not_ready", "checks": {}}, status_code=503)
        checks = {"opa": await svc.policy.ready(), "store": True}
        try:
            await svc.store.ping()
        except StoreUnavailable:
            checks["store"] = False
        if svc.redis is not None:
            try:
                checks["redis"] = bool(await svc.redis.ping())
            except (RedisError, OSError):
                checks["redis"] = False
        ready = checks["opa"] and checks["store"]
        state = ("ready" if all(checks.values()) else "degraded") if ready else "not_ready"
        return JSONResponse({"status": state, "checks": checks}, status_code=200 if ready else 503)

    # A path or method it does not serve answers as the API's do.
    refusals.install(ops, refusals.Refusals())
    return ops
