"""Which of the sidecar's modules a native request crosses, from route to answer.

    .venv/bin/python bench/modules_crossed.py

Serves the app in this process (embedded defaults: the linked OPA, the edge store, in
a temporary data directory, dev identity), sends one write and one recall to warm it
up, then sends each again under a profiler that notes the module of every sidecar
function called while the request is in flight, on the event loop and in the worker
threads the store and the policy run in. Prints, for a native write and recall, a
write the policy refuses (native, and through the Qdrant dialect) and a proxy upsert,
how many distinct `sidecar.*` modules ran and which. A count of modules, not a
benchmark: profiling makes every call slow.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sidecar.http.app import create_app  # noqa: E402
from sidecar.settings import Settings  # noqa: E402

HEADERS = {"X-Whose-Asker": "alice", "X-Whose-Tenant": "acme"}
BOB = {"X-Whose-Asker": "bob", "X-Whose-Tenant": "acme"}
RECORD = {
    "content": "Alice believes the launch is October 17",
    "proposition": {
        "text": "the launch is October 17",
        "key": "launch.date",
        "value": "2026-10-17",
    },
    "observer_id": "alice",
    "source_id": "private-session-42",
    "source": {"kind": "conversation", "speaker": "alice"},
    "modality": "reported_belief",
    "confidence": 0.78,
    "audience": ["alice"],
}
RECALL = {"query": "when is the launch?"}
# Bob may not write Alice's belief: refused by the write policy.
REFUSED = RECORD | {"observer_id": "alice", "content": "Alice believes it is cancelled"}
DOCUMENT = {
    "page_content": "The launch is October 17",
    "metadata": {"audience": ["alice"], "source_id": "notes-1"},
}
POINTS = "/collections/whose_memories/points"


class Crossed:
    """The sidecar modules whose functions ran while `on` was set."""

    def __init__(self) -> None:
        self.on = False
        self.modules: set[str] = set()

    def profile(self, frame: FrameType, event: str, _: Any) -> None:
        if self.on and event == "call":
            name = frame.f_globals.get("__name__", "")
            if name == "sidecar" or name.startswith("sidecar."):
                self.modules.add(name)


async def measured(crossed: Crossed, app: Any, send: Callable[[], Any], ok: int) -> set[str]:
    # What earlier requests left to do (audit entries, allow-rate updates) is done first.
    await app.state.services.audit.flushed()
    await app.state.services.gate.idle()
    crossed.modules = set()
    crossed.on = True
    try:
        answer = await send()
    finally:
        crossed.on = False
    assert answer.status_code == ok, answer.text
    return set(crossed.modules)


async def main() -> None:
    crossed = Crossed()
    # Worker threads (asyncio.to_thread: the store, the linked policy) start later and
    # take the profiler with them.
    threading.setprofile(crossed.profile)
    sys.setprofile(crossed.profile)
    with tempfile.TemporaryDirectory(prefix="whose-modules-") as data:
        settings = Settings(dev=True, data_dir=Path(data))
        app = create_app(settings)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://127.0.0.1", headers=HEADERS
            ) as client:

                def write() -> Any:
                    return client.post("/v1/memories", json=RECORD)

                def recall() -> Any:
                    return client.post("/v1/recall", json=RECALL)

                def refused() -> Any:
                    return client.post("/v1/memories", json=REFUSED, headers=BOB)

                def proxy_refused() -> Any:
                    point = {"id": str(uuid.uuid4()), "vector": [0.1] * 384, "payload": REFUSED}
                    return client.put(POINTS, json={"points": [point]}, headers=BOB)

                def upsert() -> Any:
                    point = {"id": str(uuid.uuid4()), "vector": [0.1] * 384, "payload": DOCUMENT}
                    return client.put(POINTS, json={"points": [point]})

                sends = {
                    "POST /v1/memories": (write, 201),
                    "POST /v1/recall": (recall, 200),
                    "POST /v1/memories, refused by the write policy": (refused, 422),
                    "PUT /collections/…/points, refused by the write policy": (proxy_refused, 422),
                    "PUT /collections/…/points (a LangChain document)": (upsert, 200),
                }
                for send, _ in sends.values():
                    await send()
                results = {
                    name: await measured(crossed, app, send, ok)
                    for name, (send, ok) in sends.items()
                }
    sys.setprofile(None)
    threading.setprofile(None)
    for route, modules in results.items():
        print(f"{route}: {len(modules)} sidecar modules")
        for module in sorted(modules):
            print(f"  {module}")


if __name__ == "__main__":
    asyncio.run(main())
