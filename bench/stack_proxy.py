"""A stack's own collection searched through the sidecar, against the same query sent to
Qdrant directly: one run, medians and their ratio (issue 37, docs/operations.md).

    .venv/bin/python bench/stack_proxy.py [--points 3000] [--dim 1536] [--queries 200]

Starts a real Qdrant server (bin/qdrant) and `whose serve` on it (WHOSE_STORE=server,
its own OPA). The same points (LangChain-shaped payloads, `dim`-dimension cosine
vectors, each readable by alice and by about half of them bob) go into a stack
collection created through the sidecar (as alice) and into a plain collection created
on Qdrant directly. Then the same nearest-neighbour query (limit 10, with payload) is
timed: on Qdrant directly (no authorization at all), and through the sidecar as alice
(every candidate allowed) and as bob (about half). Each request is one HTTP call from
one client; the three are interleaved query by query, so load on the machine falls on
all alike. This is a benchmark, not a test: it prints medians and p99 and writes
bench/results/stack_proxy.json.
"""

from __future__ import annotations

import argparse
import json
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

from tests.factories import served  # noqa: E402
from tests.qdrant_server import QdrantNode, qdrant_binary  # noqa: E402

COLLECTION = "kb"


def points(n: int, dim: int, rng: random.Random) -> list[dict[str, Any]]:
    made = []
    for i in range(n):
        readers = ["alice", "bob"] if rng.random() < 0.5 else ["alice"]
        made.append(
            {
                "id": str(uuid.UUID(int=rng.getrandbits(128))),
                "vector": [rng.gauss(0, 1) for _ in range(dim)],
                "payload": {
                    "page_content": f"note {i} about topic {i % 37}",
                    "metadata": {"audience": readers, "source": f"doc-{i % 50}.md"},
                },
            }
        )
    return made


def load(http: httpx.Client, made: list[dict[str, Any]], dim: int) -> None:
    config = {"vectors": {"size": dim, "distance": "Cosine"}}
    http.put(f"/collections/{COLLECTION}", json=config).raise_for_status()
    for start in range(0, len(made), 128):
        batch = {"points": made[start : start + 128]}
        http.put(f"/collections/{COLLECTION}/points?wait=true", json=batch).raise_for_status()


def timed(http: httpx.Client, body: dict[str, Any]) -> float:
    started = time.perf_counter()
    response = http.post(f"/collections/{COLLECTION}/points/query", json=body)
    elapsed = time.perf_counter() - started
    response.raise_for_status()
    return elapsed * 1000


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered), 2),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--points", type=int, default=3000)
    parser.add_argument("--dim", type=int, default=1536)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    binary = qdrant_binary()
    if binary is None:
        sys.exit("no Qdrant server binary: `make qdrant` (or set WHOSE_TEST_QDRANT)")
    rng = random.Random(11)
    made = points(args.points, args.dim, rng)
    with tempfile.TemporaryDirectory() as folder:
        node = QdrantNode(binary, Path(folder) / "qdrant")
        node.start()
        try:
            env = {"WHOSE_STORE": "server", "WHOSE_QDRANT_URL": node.url}
            with served(Path(folder) / "whose", env) as base:
                alice = httpx.Client(
                    base_url=base,
                    headers={"X-Whose-Asker": "alice", "X-Whose-Tenant": "acme"},
                    timeout=60,
                )
                bob = httpx.Client(
                    base_url=base,
                    headers={"X-Whose-Asker": "bob", "X-Whose-Tenant": "acme"},
                    timeout=60,
                )
                direct = httpx.Client(base_url=node.url, timeout=60)
                load(alice, made, args.dim)
                load(direct, made, args.dim)
                times: dict[str, list[float]] = {"qdrant": [], "alice": [], "bob": []}
                queries = [[rng.gauss(0, 1) for _ in range(args.dim)] for _ in range(args.queries)]
                for warm in queries[:10]:
                    body = {"query": warm, "limit": 10, "with_payload": True}
                    for c in (direct, alice, bob):
                        timed(c, body)
                for q in queries:
                    body = {"query": q, "limit": 10, "with_payload": True}
                    times["qdrant"].append(timed(direct, body))
                    times["alice"].append(timed(alice, body))
                    times["bob"].append(timed(bob, body))
                for c in (alice, bob, direct):
                    c.close()
        finally:
            node.stop()
    result: dict[str, Any] = {k: summary(v) for k, v in times.items()}
    base_p50 = result["qdrant"]["p50_ms"]
    for who in ("alice", "bob"):
        result[who]["ratio_to_qdrant"] = round(result[who]["p50_ms"] / base_p50, 2)
    result["setup"] = {"points": args.points, "dim": args.dim, "queries": args.queries}
    print(json.dumps(result, indent=2))
    out = REPO / "bench" / "results" / "stack_proxy.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
