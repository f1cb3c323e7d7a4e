"""A fused hybrid query through the query engine, and the same query sent to Qdrant.

    .venv/bin/python bench/query_engine.py [--points 10000] [--queries 200]

Starts a Qdrant server (bin/qdrant), stores `--points` records (384-dimension vectors,
the lexical vectors whose's store makes) twice: in whose's collection on the server
backend, and in a plain collection with the same points. Then asks LangChain's hybrid
query (two prefetches, dense and sparse, each with the same filter as the root, fused
by RRF, limit 10) `--queries` times each way:

- engine: reads/query/ over the whose collection, in-process (no HTTP in front of it),
  with the shipped policy through the linked evaluator and pushdown on, the store as
  the sidecar configures it (exact search below 20 000 matching points); each query
  its own request (one disclosure, audit entry and the final wording);
- qdrant: the same body POSTed to the plain collection (Qdrant's own planning: HNSW once
  its optimizer has indexed the points), and again with `params.exact` on every branch
  (what whose's store asks below WHOSE_SEARCH_EXACT_BELOW, 20 000).

Prints medians and the ratios, and per engine query the store calls and OPA
evaluations (warm: decisions cached). One run; quote it with the machine's load.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from qdrant_client.http import models as qm  # noqa: E402

from sidecar.audit.sqlite_sink import SqliteSink  # noqa: E402
from sidecar.audit.writer import AuditLog  # noqa: E402
from sidecar.http.qdrant.caller_filter import caller_filter  # noqa: E402
from sidecar.policy.cache import LocalCache  # noqa: E402
from sidecar.policy.contract import DisclosureQuestion  # noqa: E402
from sidecar.policy.linked_opa import LinkedOpa  # noqa: E402
from sidecar.reads.gate import Gate  # noqa: E402
from sidecar.reads.query import whose  # noqa: E402
from sidecar.reads.query.engine import QueryEngine  # noqa: E402
from sidecar.reads.query.plan import Bounds as QueryBounds  # noqa: E402
from sidecar.reads.reader import Bounds, Reader  # noqa: E402
from sidecar.store import Search  # noqa: E402
from sidecar.store.schema import point_id  # noqa: E402
from sidecar.store.server import ServerStore  # noqa: E402
from sidecar.store.vectors import lexical  # noqa: E402
from tests.conftest import OPA_LIBRARY, POLICY_DIR  # noqa: E402
from tests.qdrant_server import QdrantNode, qdrant_binary  # noqa: E402
from tests.query_engine import ASKER, NOW, TENANT, record  # noqa: E402

DIM = 384
COLLECTION = "whose_memories"


def dense(rng: random.Random) -> list[float]:
    return [rng.gauss(0.0, 1.0) for _ in range(DIM)]


class Counted:
    """A store or a policy client, counting the calls that reach it."""

    def __init__(self, inner: Any, names: tuple[str, ...]) -> None:
        self.inner, self.names, self.calls = inner, names, 0

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.inner, name)
        if name not in self.names:
            return attribute

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return await attribute(*args, **kwargs)

        return counted


def hybrid(rng: random.Random, terms: list[int]) -> dict[str, Any]:
    flt = {"must": [{"key": "modality", "match": {"any": ["believed", "asserted"]}}]}
    sparse = {"indices": sorted(rng.sample(terms, 3)), "values": [1.0, 0.7, 0.4]}
    return {
        "prefetch": [
            {"query": dense(rng), "using": "", "filter": flt, "limit": 10},
            {"query": sparse, "using": "lexical", "filter": flt, "limit": 10},
        ],
        "query": {"fusion": "rrf"},
        "filter": flt,
        "limit": 10,
        "with_payload": True,
    }


def exact(body: dict[str, Any]) -> dict[str, Any]:
    return body | {"prefetch": [p | {"params": {"exact": True}} for p in body["prefetch"]]}


async def main(points: int, queries: int) -> None:
    binary = qdrant_binary()
    if binary is None:
        raise SystemExit("no Qdrant server binary (bin/qdrant)")
    folder = Path(tempfile.mkdtemp(prefix="bench-query-"))
    node = QdrantNode(binary, folder / "qdrant")
    node.start()
    try:
        await run(node.url, folder, points, queries)
    finally:
        node.stop()


async def run(url: str, folder: Path, points: int, queries: int) -> None:
    rng = random.Random(11)
    items = [(record(rng, ["bob"]), dense(rng)) for _ in range(points)]
    # As the sidecar runs it: exact search below WHOSE_SEARCH_EXACT_BELOW (settings.py).
    store = ServerStore.connect(
        [url], COLLECTION, DIM, timeout_s=60, search=Search(exact_below=20_000)
    )
    await store.open()
    for i in range(0, points, 500):
        await store.put(TENANT, [(p, {"": v}) for p, v in items[i : i + 500]])
    plain = f"plain_{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(base_url=f"{url}/collections/{plain}", timeout=120) as c:
        config = {"vectors": {"size": DIM, "distance": "Cosine"}, "sparse_vectors": {"lexical": {}}}
        (await c.put("", json=config)).raise_for_status()
        for key in ("modality", "tenant"):
            await c.put("/index?wait=true", json={"field_name": key, "field_schema": "keyword"})
        for i in range(0, points, 500):
            batch = []
            for payload, vector in items[i : i + 500]:
                sparse = lexical(payload)
                batch.append(
                    {
                        "id": point_id(TENANT, payload["id"]),
                        "vector": {
                            "": vector,
                            "lexical": {"indices": sparse.indices, "values": sparse.values},
                        },
                        "payload": payload,
                    }
                )
            (await c.put("/points?wait=true", json={"points": batch})).raise_for_status()
        # Let Qdrant's optimizer index the plain collection as it would in service.
        for _ in range(600):
            info = (await c.get("")).json()["result"]
            if info["status"] == "green" and info.get("optimizer_status") == "ok":
                break
            await asyncio.sleep(0.5)
    terms = sorted({i for payload, _ in items for i in lexical(payload).indices})
    bodies = [hybrid(random.Random(1000 + n), terms) for n in range(queries)]

    policy = LinkedOpa(OPA_LIBRARY, POLICY_DIR, folder / "opa-bundle", 5.0)
    await policy.start()
    counted_store = Counted(store, ("probe", "ordered", "fetch", "find", "get", "search"))
    counted_policy = Counted(policy, ("disclosure",))
    audit = AuditLog(SqliteSink(folder / "audit.sqlite3"), None, 100_000)
    await audit.start()
    gate = Gate(counted_policy, LocalCache(100_000, ttl_s=600), audit, bucket_s=60)  # type: ignore[arg-type]
    reader = Reader(counted_store, gate, Bounds(4, 4, 1000))
    engine = QueryEngine(QueryBounds())

    def check(flt: qm.Filter) -> qm.Filter:
        checked = caller_filter(
            flt.model_dump(mode="json", exclude_none=True, by_alias=True), TENANT
        )
        assert checked is not None
        return checked

    async def through_engine(body: dict[str, Any]) -> float:
        question = DisclosureQuestion(asker=ASKER, audience=[], purpose="recall", now=NOW)
        started = time.perf_counter()
        async with whose.opened(reader, question, "bench", check, COLLECTION, DIM) as coll:

            async def lookup(name: str) -> None:
                return None

            answer = await engine.query(coll, qm.QueryRequest.model_validate(body), lookup)
            await coll.shown(answer.hits)
        assert answer.hits
        return time.perf_counter() - started

    async with httpx.AsyncClient(base_url=f"{url}/collections/{plain}", timeout=60) as c:

        async def direct(body: dict[str, Any]) -> float:
            started = time.perf_counter()
            response = await c.post("/points/query", json=body)
            response.raise_for_status()
            assert response.json()["result"]["points"]
            return time.perf_counter() - started

        for body in bodies[:20]:  # warm both (decision cache, pushdown, connections)
            await through_engine(body)
            await direct(body)
        store_before, policy_before = counted_store.calls, counted_policy.calls
        engine_s, direct_s, exact_s = [], [], []
        for body in bodies:
            engine_s.append(await through_engine(body))
            direct_s.append(await direct(body))
            exact_s.append(await direct(exact(body)))
        per_store = (counted_store.calls - store_before) / len(bodies)
        per_policy = (counted_policy.calls - policy_before) / len(bodies)
        await c.delete("")
    await audit.close()
    await policy.close()
    await store.close()

    def ms(samples: list[float]) -> float:
        return statistics.median(samples) * 1000

    e, d, x = ms(engine_s), ms(direct_s), ms(exact_s)
    print(f"{points} points, {queries} fused hybrid queries (dense + sparse, RRF, limit 10)")
    print(f"engine (whose collection, server backend, in-process): median {e:.2f} ms")
    print(f"qdrant directly (its own planning):                     median {d:.2f} ms")
    print(f"qdrant directly (exact branches):                       median {x:.2f} ms")
    print(f"ratio engine / qdrant: {e / d:.1f}x; engine / qdrant exact: {e / x:.1f}x")
    print(
        f"per engine query: {per_store:.1f} store calls (each also asks Qdrant for a count"
        f" estimate), {per_policy:.2f} OPA evaluations"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--points", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(main(args.points, args.queries))
