"""The plain-store baseline: the sidecar's HTTP stack and embedded store returning the
store's nearest hits with no policy at all. The asker's permission is what a plain
Qdrant user would filter on: the tenant, and the asker named in the audience; the
search runs with the same search settings as the sidecar's (WHOSE_SEARCH_*).

python -m sidecar.bench.passthrough --data-dir D --port P
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request

from sidecar.embed.hashing import HashingEmbedder
from sidecar.http.bodies import JsonRoute
from sidecar.policy.contract import policy_view
from sidecar.services import open_store
from sidecar.settings import Settings
from sidecar.store.scope import Scope


def passthrough_app(data_dir: Path) -> FastAPI:
    settings = Settings(data_dir=data_dir, store="edge")
    store = open_store(settings)
    embedder = HashingEmbedder(settings.vector_size)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await store.open()
        yield
        await store.close()

    app = FastAPI(lifespan=lifespan)
    # The sidecar's own route class: bodies parsed as the sidecar parses them.
    app.router.route_class = JsonRoute

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/v1/recall")
    async def recall(body: dict[str, Any], request: Request) -> dict[str, Any]:
        tenant = request.headers.get("X-Whose-Tenant", "acme")
        asker = request.headers.get("X-Whose-Asker")
        scope = Scope(
            tenant=tenant,
            current_at=datetime.now(UTC),
            audience_any_of=((asker,),) if asker else (),
        )
        vector = body.get("vector") or embedder.embed(body["query"])
        hits = await store.search(vector, scope, int(body["limit"]))
        return {"items": [policy_view(h.payload) | {"id": h.id, "score": h.score} for h in hits]}

    return app


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = passthrough_app(args.data_dir)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
